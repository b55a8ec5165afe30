// CPU reference (float64) for kernels/ppo/reverse-returns: the return-to-go scans of REINFORCE++ (discounted, reset
// after every masked token) and ReMax (undiscounted sum of masked rewards, minus a per-sequence baseline).
import { maskedWhiten } from './masked-stats.ref.ts';

export function reinforcePlusPlusReturnsRef(
  rewards: ArrayLike<number>,
  mask: ArrayLike<number>,
  gamma: number,
  B: number,
  T: number,
): Float64Array {
  const returns = new Float64Array(B * T);
  for (let b = 0; b < B; b++) {
    let running = 0;
    for (let t = T - 1; t >= 0; t--) {
      const i = b * T + t;
      running = rewards[i] + gamma * running;
      returns[i] = running;
      running *= mask[i];
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
): { advantages: Float64Array; returns: Float64Array } {
  const returns = reinforcePlusPlusReturnsRef(rewards, mask, gamma, B, T);
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
