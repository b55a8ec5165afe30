// CPU reference of the optimizer (float64), following torch.optim.AdamW (single-tensor path) and
// torch.nn.utils.clip_grad_norm_. Updates params, m, v in place.
import type { AdamwHyperparameters } from './adamw.ts';

export function gradNormSquaredRef(grads: readonly ArrayLike<number>[]): number {
  let sum = 0;
  for (const g of grads) for (let i = 0; i < g.length; i++) sum += g[i] * g[i];
  return sum;
}

export interface AdamwRefArgs extends AdamwHyperparameters {
  params: Float64Array;
  grads: ArrayLike<number>;
  m: Float64Array;
  v: Float64Array;
  /** Σ g² over every segment, of the unscaled gradients. */
  normSquared: number;
  /** When the weight decay applies: torch's 'before' the step (default), bitsandbytes' 'after'. */
  decay?: 'before' | 'after';
}

/** A non-finite normSquared (a NaN or Inf gradient) leaves params, m and v as they were, as the kernel does. */
export function adamwStepRef(a: AdamwRefArgs): void {
  const { params, grads, m, v, lr, beta1, beta2, eps, weightDecay, step } = a;
  if (!Number.isFinite(a.normSquared)) return;
  const gradScale = a.gradScale ?? 1;
  // clip_grad_norm_ sees the already-scaled gradients, whose norm is |gradScale|·√normSquared.
  const totalNorm = Math.abs(gradScale) * Math.sqrt(a.normSquared);
  const clip = a.maxNorm > 0 ? Math.min(1, a.maxNorm / (totalNorm + 1e-6)) : 1;
  const biasCorrection1 = 1 - beta1 ** step;
  const biasCorrection2Sqrt = Math.sqrt(1 - beta2 ** step);
  const stepSize = lr / biasCorrection1;
  for (let i = 0; i < params.length; i++) {
    const g = grads[i] * gradScale * clip;
    if (a.decay !== 'after') params[i] *= 1 - lr * weightDecay;
    m[i] = beta1 * m[i] + (1 - beta1) * g;
    v[i] = beta2 * v[i] + (1 - beta2) * g * g;
    const denom = Math.sqrt(v[i]) / biasCorrection2Sqrt + eps;
    params[i] -= stepSize * (m[i] / denom);
    if (a.decay === 'after') params[i] *= 1 - lr * weightDecay;
  }
}
