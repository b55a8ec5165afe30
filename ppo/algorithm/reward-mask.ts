// algorithm.reward_mask_ratio: after rewards and before the KL penalty and advantages, each whole trajectory's
// scores are zeroed with this probability — one Bernoulli draw per trajectory from the run's seeded stream, so
// a resumed run masks the same trajectories. The batch keeps its shape; the realised ratio is logged.
import type { Rng } from '../../engine/rng.ts';

export interface RewardMask {
  /** 1 keeps trajectory b's scores, 0 zeroes them. */
  keep: Float32Array;
  /** The realised ratio, logged only when masking is on. */
  metrics: { 'reward_mask/ratio_actual'?: number };
}

/**
 * Draws the mask for B trajectories; ratio 0 draws nothing, so enabling the option is the only thing that moves the
 * stream.
 */
export function sampleRewardMask(rng: Rng, B: number, ratio: number): RewardMask {
  if (!(ratio >= 0 && ratio <= 1)) throw new Error(`algorithm.reward_mask_ratio must be in [0, 1], got ${ratio}`);
  const keep = new Float32Array(B).fill(1);
  if (ratio > 0) for (let b = 0; b < B; b++) if (rng.next() < ratio) keep[b] = 0;
  const masked = keep.reduce((n, k) => n + (k === 0 ? 1 : 0), 0);
  return { keep, metrics: ratio > 0 ? { 'reward_mask/ratio_actual': masked / B } : {} };
}
