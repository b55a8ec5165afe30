import fromHalfSource from './from-half.wgsl';
import {
  type Engine,
  type Tensor,
  type KernelSpec,
  type HalfDType,
  expectSize,
  foldWorkgroups,
  isHalf,
  shapeString,
} from '../../engine/index.ts';
import { unpackPairSource } from './half-weights.ts';
import { forEachHalfWindow } from './to-half.ts';

const spec = (dtype: HalfDType): KernelSpec => ({
  name: `from-half/${dtype}`,
  source: unpackPairSource(dtype) + fromHalfSource,
  bindings: [
    { name: 'halves', access: 'read', type: 'u32' },
    { name: 'values', access: 'read_write' },
  ],
  uniforms: [{ name: 'n', type: 'u32' }],
});
const specs: Record<HalfDType, KernelSpec> = { bf16: spec('bf16'), f16: spec('f16') };

/** values (f32) = halves (bf16 or f16) unpacked, same shape: exact. Either larger than one binding is converted in
 *  windows (one dispatch each). */
export function fromHalf(engine: Engine, a: { halves: Tensor; values: Tensor }): void {
  const { halves, values } = a;
  if (values.dtype !== 'f32')
    throw new Error(`fromHalf: values (tensor ${values.name}) is ${values.dtype}, expected f32`);
  if (!isHalf(halves.dtype))
    throw new Error(`fromHalf: halves (tensor ${halves.name}) is ${halves.dtype}, expected bf16 or f16`);
  expectSize(
    'fromHalf',
    'values',
    values,
    halves.size,
    `halves' shape (tensor ${halves.name}, ${shapeString(halves.shape)})`,
  );
  forEachHalfWindow(engine, values, halves, (valuesWindow, halvesWindow, n) =>
    engine.dispatch(specs[halves.dtype as HalfDType], {
      bindings: { halves: halvesWindow, values: valuesWindow },
      uniforms: { n },
      workgroups: foldWorkgroups(Math.ceil(n / 2 / 256)),
    }),
  );
}
