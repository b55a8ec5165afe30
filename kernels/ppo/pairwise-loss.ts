// The reward model's pairwise (Bradley–Terry) loss: the score gather, the loss, its gradient and TRL's metrics in
// one dispatch. Used by ppo/reward-model/.
import source from './pairwise-loss.wgsl';
import { type Engine, type Tensor, type KernelSpec, expectSize, foldWorkgroups } from '../../engine/index.ts';
import { withWorkgroupReduce } from './ppo-shared.ts';

export const pairwiseLossSpec: KernelSpec = {
  name: 'pairwise-loss',
  source: withWorkgroupReduce(source),
  bindings: [
    { name: 'values', access: 'read' },
    { name: 'last', access: 'read', type: 'u32' },
    { name: 'margin', access: 'read' },
    { name: 'dValues', access: 'read_write' },
    { name: 'stats', access: 'read_write' },
  ],
  uniforms: [
    { name: 'P', type: 'u32' },
    { name: 'T', type: 'u32' },
    { name: 'gradScale', type: 'f32' },
  ],
};

/** The index of each pairwise-loss statistic in `stats`. */
export const PAIRWISE_STATS = { loss: 0, accuracy: 1, margin: 2 } as const;

/**
 * values, dValues: [2P, T] (P chosen rows, then their P rejected rows); last: [2P] u32, each row's last non-pad
 * position; margin: [P]; stats: [3] (loss, accuracy, mean r_chosen − r_rejected). dValues is d loss / d values times
 * gradScale (default 1).
 */
export function pairwiseLoss(
  engine: Engine,
  args: {
    values: Tensor;
    last: Tensor<'u32'>;
    margin: Tensor;
    dValues: Tensor;
    stats: Tensor;
    P: number;
    T: number;
    gradScale?: number;
  },
): void {
  const { P, T } = args;
  if (!Number.isInteger(P) || !Number.isInteger(T) || P < 1 || T < 1)
    throw new Error(`pairwise-loss: P=${P}, T=${T}; expected positive integers`);
  expectSize('pairwise-loss', 'values', args.values, 2 * P * T, `[2P=${2 * P}, T=${T}]`);
  expectSize('pairwise-loss', 'dValues', args.dValues, 2 * P * T, `[2P=${2 * P}, T=${T}]`);
  expectSize('pairwise-loss', 'last', args.last, 2 * P, `[2P=${2 * P}]`);
  expectSize('pairwise-loss', 'margin', args.margin, P, `[P=${P}]`);
  expectSize('pairwise-loss', 'stats', args.stats, 3, '[3]');
  engine.dispatch(pairwiseLossSpec, {
    bindings: { values: args.values, last: args.last, margin: args.margin, dValues: args.dValues, stats: args.stats },
    uniforms: { P, T, gradScale: args.gradScale ?? 1 },
    workgroups: foldWorkgroups(Math.ceil((2 * P * T) / 64)),
  });
}
