import source from './masked-stats.wgsl';
import {
  type Engine,
  type Tensor,
  type KernelSpec,
  foldWorkgroups,
  expectSize,
  shapeString,
} from '../../engine/index.ts';
import { expectRows, withWorkgroupReduce } from './ppo-shared.ts';

const bindings = [
  { name: 'values', access: 'read_write' },
  { name: 'mask', access: 'read' },
  { name: 'stats', access: 'read_write' },
] as const;
const uniforms = [
  { name: 'n', type: 'u32' },
  { name: 'T', type: 'u32' },
  { name: 'shiftMean', type: 'u32' },
  { name: 'maskOutput', type: 'u32' },
] as const;

export const maskedMomentsSpec: KernelSpec = {
  name: 'masked-stats/moments',
  source: withWorkgroupReduce(source),
  entryPoint: 'moments',
  bindings,
  uniforms,
};
export const maskedWhitenSpec: KernelSpec = {
  name: 'masked-stats/whiten',
  source: withWorkgroupReduce(source),
  entryPoint: 'whiten',
  bindings,
  uniforms,
};
export const maskedRowSumsSpec: KernelSpec = {
  name: 'masked-stats/row-sums',
  source: withWorkgroupReduce(source),
  entryPoint: 'rowSums',
  bindings,
  uniforms,
};

/** stats [4] = (masked sum, mask count, masked mean, unbiased masked var) of values under mask (maskedWhitenGpu's
 *  first pass). */
export function maskedMomentsGpu(engine: Engine, values: Tensor, mask: Tensor, stats: Tensor): void {
  expectSize('masked-stats', 'mask', mask, values.size, `values' shape ${shapeString(values.shape)}`);
  expectSize('masked-stats', 'stats', stats, 4, '[4]');
  engine.dispatch(maskedMomentsSpec, {
    bindings: { values, mask, stats },
    uniforms: { n: values.size, T: 1, shiftMean: 1, maskOutput: 0 },
    workgroups: [1],
  });
}

/** verl's masked_whiten in place (stats scratch [4]); multiplyByMask adds the "· mask" several estimators apply.
 *  On the training path: the advantage estimators (gae, reverse-returns, advantage-outcome) whiten with it. */
export function maskedWhitenGpu(
  engine: Engine,
  args: { values: Tensor; mask: Tensor; stats: Tensor; shiftMean?: boolean; multiplyByMask?: boolean },
): void {
  const { values, mask, stats } = args;
  maskedMomentsGpu(engine, values, mask, stats);
  engine.dispatch(maskedWhitenSpec, {
    bindings: { values, mask, stats },
    uniforms: {
      n: values.size,
      T: 1,
      shiftMean: args.shiftMean === false ? 0 : 1,
      maskOutput: args.multiplyByMask ? 1 : 0,
    },
    workgroups: foldWorkgroups(Math.ceil(values.size / 256)),
  });
}

/** sums [2B]: per row (masked sum, masked mean) — verl's masked_sum / masked_mean with axis=-1.
 *  Harness only, not on the training path: tools/verl/masked-stats.ts and tests. */
export function maskedRowSumsGpu(
  engine: Engine,
  args: { values: Tensor; mask: Tensor; sums: Tensor; B: number; T: number },
): void {
  const { B, T } = args;
  expectRows('masked-stats', B, T);
  expectSize('masked-stats', 'values', args.values, B * T, `[B=${B}, T=${T}]`);
  expectSize('masked-stats', 'mask', args.mask, B * T, `[B=${B}, T=${T}]`);
  expectSize('masked-stats', 'sums', args.sums, 2 * B, `[B=${B}, 2]`);
  engine.dispatch(maskedRowSumsSpec, {
    bindings: { values: args.values, mask: args.mask, stats: args.sums },
    uniforms: { n: B * T, T, shiftMean: 1, maskOutput: 0 },
    workgroups: [B],
  });
}
