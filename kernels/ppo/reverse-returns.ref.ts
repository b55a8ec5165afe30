// CPU reference (float64) for kernels/ppo/reverse-returns: the return-to-go scans of REINFORCE++ (discounted; verl
// 1dda039b carries the return across mask-0 spans, b178a3cd reset it there) and ReMax (undiscounted sum of masked
// rewards, minus a per-sequence baseline).
import { maskedWhiten } from './masked-stats.ref.ts';

export function reinforcePlusPlusReturnsRef(
  rewards: ArrayLike<number>,
  mask: ArrayLike<number>,
  gamma: number,
  B: number,
  T: number,
  carryAcrossMask = true,
): Float64Array {
  const returns = new Float64Array(B * T);
  for (let b = 0; b < B; b++) {
    let running = 0;
    for (let t = T - 1; t >= 0; t--) {
      const i = b * T + t;
      const next = rewards[i] + gamma * running;
      if (carryAcrossMask) {
        // verl 1dda039b, term for term.
        returns[i] = next * mask[i];
        running = next * mask[i] + running * (1 - mask[i]);
      } else {
        returns[i] = next;
        running = next * mask[i];
      }
    }
  }
  return returns;
}

export function computeReinforcePlusPlusOutcomeAdvantageRef(
  rewards: ArrayLike<number>,
  mask: ArrayLike<number>,
  gamma: number,
  B: number,
  T: number,
  carryAcrossMask = true,
): { advantages: Float64Array; returns: Float64Array } {
  const returns = reinforcePlusPlusReturnsRef(rewards, mask, gamma, B, T, carryAcrossMask);
  return { advantages: maskedWhiten(returns, mask, true, true), returns };
}

export function computeRemaxOutcomeAdvantageRef(
  rewards: ArrayLike<number>,
  rewardBaselines: ArrayLike<number>,
  mask: ArrayLike<number>,
  B: number,
  T: number,
): { advantages: Float64Array; returns: Float64Array } {
  const returns = new Float64Array(B * T);
  const advantages = new Float64Array(B * T);
  for (let b = 0; b < B; b++) {
    let running = 0;
    for (let t = T - 1; t >= 0; t--) {
      const i = b * T + t;
      running += rewards[i] * mask[i];
      returns[i] = running;
      advantages[i] = running - rewardBaselines[b] * mask[i];
    }
  }
  return { advantages, returns };
}
