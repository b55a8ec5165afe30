// The update schedule shared by actor and critic: ppo_epochs passes over the experience, each split into
// mini-batches (one optimizer step each) and those into micro-batches (gradient accumulation). The loss
// aggregation of every micro-batch carries its mini-batch's totals, so accumulated micro-batch gradients equal
// the unsplit mini-batch's (verl's known token-mean-under-accumulation pitfall).
import type { Rng } from '../../engine/rng.ts';
import type { TokenBatch } from '../../models/token-batch.ts';
import { checkLossAggMode, type LossAggregation } from '../../kernels/ppo-vocabulary.ts';
import { blocks, type SequenceBufferPool, type SequenceBuffers } from './sequence-buffers.ts';
import type { AdamWOptimizer } from './adamw-optimizer.ts';
import type { Experience } from './experience.ts';
import type { MetricAccumulator } from './metric-accumulator.ts';
import { checkFinite } from './finite-guard.ts';

export interface MiniBatchPlan {
  epoch: number;
  /** Row indices of the experience, in mini-batch order. */
  rows: number[];
  microBatches: number[][];
  aggregation: LossAggregation;
}

export interface ScheduleConfig {
  epochs: number;
  miniBatchSize: number;
  microBatchSize: number;
  shuffle: boolean;
  lossAggMode: string;
}

function permutation(n: number, rng: Rng): number[] {
  const order = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(rng.next() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  return order;
}

/** Mini-batch aggregation denominators: valid tokens and non-empty rows of the mini-batch, response length R. */
export function miniBatchAggregation(mode: string, responseMask: Float32Array, rows: readonly number[], R: number): LossAggregation {
  let tokens = 0;
  let nonEmpty = 0;
  for (const row of rows) {
    let count = 0;
    for (let t = 0; t < R; t++) count += responseMask[row * R + t];
    tokens += count;
    if (count > 0) nonEmpty++;
  }
  // An all-masked mini-batch has zero loss; a denominator of 1 keeps its weights finite (and zero).
  return { mode: checkLossAggMode(mode), batchNumTokens: Math.max(1, tokens), globalBatchSize: Math.max(1, nonEmpty), lossScaleFactor: R, dpSize: 1 };
}

export function* miniBatches(N: number, R: number, responseMask: Float32Array, config: ScheduleConfig, rng: Rng): Generator<MiniBatchPlan> {
  if (N % config.miniBatchSize !== 0) throw new Error(`ppo_mini_batch_size × rollout.n = ${config.miniBatchSize} does not divide the ${N} sequences of a step`);
  for (let epoch = 0; epoch < config.epochs; epoch++) {
    const order = config.shuffle ? permutation(N, rng) : Array.from({ length: N }, (_, i) => i);
    for (const rows of blocks(order, config.miniBatchSize)) {
      yield {
        epoch, rows,
        microBatches: blocks(rows, config.microBatchSize),
        aggregation: miniBatchAggregation(config.lossAggMode, responseMask, rows, R),
      };
    }
  }
}

export interface MicroBatch {
  mini: MiniBatchPlan;
  rows: number[];
  /** The micro-batch's buffers, its sequences and response mask uploaded. */
  buffers: SequenceBuffers;
  batch: TokenBatch;
}

/**
 * The micro-batches of one update (actor or critic), each with its uploaded sequences; the caller accumulates
 * gradients into `optimizer.grads` for each. Around them: gradients zeroed before each mini-batch, and after it an
 * AdamW step at `lr` and its gradient norm recorded as `gradNormMetric`.
 */
export async function* optimizerMicroBatches(
  x: Experience, config: ScheduleConfig & { lr: number }, rng: Rng, pool: SequenceBufferPool, optimizer: AdamWOptimizer,
  metrics: MetricAccumulator, gradNormMetric: string,
): AsyncGenerator<MicroBatch> {
  for (const mini of miniBatches(x.N, x.R, x.responseMask, config, rng)) {
    optimizer.zeroGrad();
    for (const rows of mini.microBatches) {
      const buffers = pool.get(rows.length, x.S, x.R);
      const batch = buffers.uploadSequences(x.rollout, rows);
      buffers.uploadResponse(buffers.responseMask, x.responseMask, rows);
      yield { mini, rows, buffers, batch };
    }
    optimizer.step(config.lr);
    const gradNorm = await optimizer.gradNorm();
    checkFinite(gradNormMetric, gradNorm);
    metrics.addMean(gradNormMetric, gradNorm, 1);
  }
}
