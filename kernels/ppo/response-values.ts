import source from './response-values.wgsl';
import {
  type Engine,
  type Tensor,
  type KernelSpec,
  type BindingSpec,
  type UniformSpec,
  foldWorkgroups,
  expectSize,
} from '../../engine/index.ts';

const bindings: BindingSpec[] = [
  { name: 'sequence', access: 'read_write' },
  { name: 'response', access: 'read_write' },
];
const uniforms: UniformSpec[] = [
  { name: 'B', type: 'u32' },
  { name: 'S', type: 'u32' },
  { name: 'T', type: 'u32' },
];

export const responseValuesGatherSpec: KernelSpec = {
  name: 'response-values/gather',
  source,
  entryPoint: 'gather',
  bindings,
  uniforms,
};
export const responseValuesScatterSpec: KernelSpec = {
  name: 'response-values/scatter',
  source,
  entryPoint: 'scatter',
  bindings,
  uniforms,
};

function check(sequence: Tensor, response: Tensor, B: number, S: number, T: number): void {
  if (T + 1 > S)
    throw new Error(
      `response-values: a response of T=${T} tokens needs a sequence of at least T+1 positions, got S=${S}`,
    );
  expectSize('response-values', 'sequence values', sequence, B * S, `[B=${B}, S=${S}]`);
  expectSize('response-values', 'response values', response, B * T, `[B=${B}, T=${T}]`);
}

/** response [B, T] = sequence [B, S] shifted one position left: the value of token t is read before t exists. */
export function gatherResponseValuesGpu(
  engine: Engine,
  sequence: Tensor,
  response: Tensor,
  B: number,
  S: number,
  T: number,
): void {
  check(sequence, response, B, S, T);
  engine.dispatch(responseValuesGatherSpec, {
    bindings: { sequence, response },
    uniforms: { B, S, T },
    workgroups: foldWorkgroups(Math.ceil((B * T) / 256)),
  });
}

/** The backward of gatherResponseValuesGpu: d/d sequence [B, S] from d/d response [B, T] (zeros elsewhere). */
export function scatterResponseValueGradsGpu(
  engine: Engine,
  sequence: Tensor,
  response: Tensor,
  B: number,
  S: number,
  T: number,
): void {
  check(sequence, response, B, S, T);
  engine.dispatch(responseValuesScatterSpec, {
    bindings: { sequence, response },
    uniforms: { B, S, T },
    workgroups: foldWorkgroups(Math.ceil((B * S) / 256)),
  });
}
