// CPU reference (float64) for kernels/ppo/value-loss: verl's compute_value_loss,
//   vf_loss = 0.5·agg(max((v − R)², (clip(v, v_old ± c) − R)²)),  vf_clipfrac = masked_mean((clipped − R)² > (v − R)²),
// with torch autograd's tie rules for max/min (clip_by_value is max(min(x, hi), lo)).
import { aggWeight } from './agg-loss.ref.ts';
import type { LossAggregation } from './ppo-vocabulary.ts';

function minGrad(a: number, da: number, b: number, db: number): [number, number] {
  return a < b ? [a, da] : a > b ? [b, db] : [a, 0.5 * (da + db)];
}

function maxGrad(a: number, da: number, b: number, db: number): [number, number] {
  return a > b ? [a, da] : a < b ? [b, db] : [a, 0.5 * (da + db)];
}

export function computeValueLossRef(args: {
  vpreds: ArrayLike<number>;
  returns: ArrayLike<number>;
  values: ArrayLike<number>;
  responseMask: ArrayLike<number>;
  cliprangeValue: number;
  B: number;
  T: number;
  aggregation: LossAggregation;
}): { vfLoss: number; vfClipfrac: number; gradVpreds: Float64Array } {
  const { B, T } = args;
  const gradVpreds = new Float64Array(B * T);
  let vfLoss = 0,
    clipped = 0,
    count = 0;
  for (let b = 0; b < B; b++) {
    let rowCount = 0;
    for (let t = 0; t < T; t++) rowCount += args.responseMask[b * T + t];
    for (let t = 0; t < T; t++) {
      const i = b * T + t;
      const m = args.responseMask[i];
      if (m === 0) continue;
      const v = args.vpreds[i],
        r = args.returns[i],
        old = args.values[i];
      const [upper, dupper] = minGrad(v, 1, old + args.cliprangeValue, 0);
      const [vc, dvc] = maxGrad(upper, dupper, old - args.cliprangeValue, 0);
      const l1 = (v - r) ** 2,
        l2 = (vc - r) ** 2;
      const [loss, dloss] = maxGrad(l1, 2 * (v - r), l2, 2 * (vc - r) * dvc);
      const w = 0.5 * aggWeight(args.aggregation, m, rowCount);
      vfLoss += w * loss;
      gradVpreds[i] = w * dloss;
      count += m;
      if (l2 > l1) clipped += m;
    }
  }
  return { vfLoss, vfClipfrac: clipped / (count + 1e-8), gradVpreds };
}
