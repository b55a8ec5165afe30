import swigluSource from './swiglu.wgsl';
import { type Engine, type Tensor, type KernelSpec, foldWorkgroups, expectSize } from '../../engine/index.ts';
import { shaderSource, specsByWidth, vectorElementType, widestVector } from '../util/rowwise.ts';

const uniforms = [
  { name: 'rows', type: 'u32' },
  { name: 'I', type: 'u32' },
] as const;

const forwardSpecs = specsByWidth(
  (width): KernelSpec => ({
    name: `swiglu/forward-vec${width}`,
    source: shaderSource('swiglu', swigluSource, 'forward', width),
    entryPoint: 'forward',
    bindings: [
      { name: 'gateUp', access: 'read', type: vectorElementType(width) },
      { name: 'out', access: 'read_write', type: vectorElementType(width) },
    ],
    uniforms,
  }),
);

const backwardSpecs = specsByWidth(
  (width): KernelSpec => ({
    name: `swiglu/backward-vec${width}`,
    source: shaderSource('swiglu', swigluSource, 'backward', width),
    entryPoint: 'backward',
    bindings: [
      { name: 'gateUp', access: 'read', type: vectorElementType(width) },
      { name: 'dOut', access: 'read', type: vectorElementType(width) },
      { name: 'dGateUp', access: 'read_write', type: vectorElementType(width) },
    ],
    uniforms,
  }),
);

function workgroups(rows: number, I: number): [number, number, number] {
  return foldWorkgroups(Math.ceil((rows * I) / widestVector(I) / 256));
}

/** out = silu(gate) * up on the fused gate/up buffer: gateUp (rows, 2I) -> out (rows, I). */
export function swigluForward(engine: Engine, a: { gateUp: Tensor; out: Tensor; rows: number; I: number }): void {
  const { gateUp, out, rows, I } = a;
  expectSize('swigluForward', 'gateUp', gateUp, rows * 2 * I, `[rows=${rows}, 2I=${2 * I}]`);
  expectSize('swigluForward', 'out', out, rows * I, `[rows=${rows}, I=${I}]`);
  engine.dispatch(forwardSpecs[widestVector(I)], {
    bindings: { gateUp, out },
    uniforms: { rows, I },
    workgroups: workgroups(rows, I),
  });
}

/** dGateUp (rows, 2I), overwritten: the gate and up gradients of swigluForward for dOut (rows, I). */
export function swigluBackward(
  engine: Engine,
  a: { gateUp: Tensor; dOut: Tensor; dGateUp: Tensor; rows: number; I: number },
): void {
  const { gateUp, dOut, dGateUp, rows, I } = a;
  expectSize('swigluBackward', 'gateUp', gateUp, rows * 2 * I, `[rows=${rows}, 2I=${2 * I}]`);
  expectSize('swigluBackward', 'dOut', dOut, rows * I, `[rows=${rows}, I=${I}]`);
  expectSize('swigluBackward', 'dGateUp', dGateUp, rows * 2 * I, `[rows=${rows}, 2I=${2 * I}]`);
  engine.dispatch(backwardSpecs[widestVector(I)], {
    bindings: { gateUp, dOut, dGateUp },
    uniforms: { rows, I },
    workgroups: workgroups(rows, I),
  });
}
