import fromHalfSource from './from-half.wgsl';
import { type Engine, type Tensor, type KernelSpec, type HalfDType, foldWorkgroups } from '../../engine/index.ts';
import { unpackPairSource } from './half-weights.ts';
import { expectHalfPair, forEachHalfWindow } from './to-half.ts';

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
  expectHalfPair('fromHalf', values, halves);
  forEachHalfWindow(engine, values, halves, (valuesWindow, halvesWindow, n) =>
    engine.dispatch(specs[halves.dtype as HalfDType], {
      bindings: { halves: halvesWindow, values: valuesWindow },
      uniforms: { n },
      workgroups: foldWorkgroups(Math.ceil(n / 2 / 256)),
    }),
  );
}
