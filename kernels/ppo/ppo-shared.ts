// Launcher helpers shared by the PPO math kernels: the row-count check of the one-workgroup-per-sequence kernels,
// the loss-aggregation uniforms, and source assembly for kernels that prepend the shared WGSL snippets.
import type { LossAggregation } from './ppo-vocabulary.ts';
import workgroupReduceSource from './workgroup-reduce.wgsl';
import klEstimatorsSource from './kl-estimators.wgsl';
import vanillaPolicyTermSource from './vanilla-policy-term.wgsl';

export function withWorkgroupReduce(source: string): string {
  return `${workgroupReduceSource}\n${source}`;
}

export function withKlEstimators(source: string): string {
  return `${klEstimatorsSource}\n${source}`;
}

export function withVanillaPolicyTerm(source: string): string {
  return `${vanillaPolicyTermSource}\n${source}`;
}

/** Row kernels launch one workgroup per sequence along x only. */
export function expectRows(op: string, B: number, T: number): void {
  if (!Number.isInteger(B) || !Number.isInteger(T) || B < 1 || T < 1 || B > 65535) {
    throw new Error(`${op}: B=${B}, T=${T}; expected integers with 1 ≤ B ≤ 65535 and T ≥ 1`);
  }
}

const AGG_MODE_CODES = {
  'token-mean': 0,
  'seq-mean-token-sum': 1,
  'seq-mean-token-mean': 2,
  'seq-mean-token-sum-norm': 3,
  'token-sum': 4,
} as const;

/** aggWeight's (mode, scale): scale folds dp_size and the global denominators of the mode (verl 1dda039b's
 *  agg_loss). */
export function aggregationUniforms(agg: LossAggregation): { mode: number; scale: number } {
  const denominator = {
    'token-mean': agg.batchNumTokens,
    'seq-mean-token-sum': agg.globalBatchSize,
    'seq-mean-token-mean': agg.globalBatchSize,
    'seq-mean-token-sum-norm': agg.globalBatchSize * agg.lossScaleFactor,
    'token-sum': 1,
  }[agg.mode];
  const scale = agg.dpSize / denominator;
  return { mode: AGG_MODE_CODES[agg.mode], scale: Number.isFinite(scale) ? scale : 0 };
}
