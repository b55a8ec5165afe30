// CPU reference (float64) for kernels/ppo/gae: verl's compute_gae_advantage_return (current main). Masked tokens
// (multi-turn observations, padding) carry nextvalues and lastgaelam across them instead of resetting, so an
// interior gap does not cut the return; advantages are then masked-whitened (not multiplied by the mask) and
// returns are the raw advantages plus values.
import { maskedWhiten } from './masked-stats.ref.ts';

export function gaeScanRef(args: {
  tokenLevelRewards: ArrayLike<number>;
  values: ArrayLike<number>;
  responseMask: ArrayLike<number>;
  gamma: number;
  lam: number;
  B: number;
  T: number;
}): Float64Array {
  const { B, T, gamma, lam } = args;
  const advantages = new Float64Array(B * T);
  for (let b = 0; b < B; b++) {
    let nextValue = 0;
    let lastGaeLam = 0;
    for (let t = T - 1; t >= 0; t--) {
      const i = b * T + t;
      const m = args.responseMask[i];
      const delta = args.tokenLevelRewards[i] + gamma * nextValue - args.values[i];
      const gaeLam = delta + gamma * lam * lastGaeLam;
      nextValue = args.values[i] * m + (1 - m) * nextValue;
      lastGaeLam = gaeLam * m + (1 - m) * lastGaeLam;
      advantages[i] = lastGaeLam;
    }
  }
  return advantages;
}

export function computeGaeAdvantageReturnRef(args: Parameters<typeof gaeScanRef>[0]): {
  advantages: Float64Array;
  returns: Float64Array;
} {
  const raw = gaeScanRef(args);
  const returns = raw.map((a, i) => a + args.values[i]);
  return { advantages: maskedWhiten(raw, args.responseMask), returns };
}
