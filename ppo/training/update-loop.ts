// The update loop the actor and the critic share (verl's dp_actor.update_policy and dp_critic.update_critic):
// ppo_epochs passes over one step's experience, each shuffled and split into mini-batches (one AdamW step each),
// and those into micro-batches (gradient accumulation). The actor and the critic supply only what one
// micro-batch computes: its loss, its backward into optimizer.grads, and its metrics. The loss aggregation of
// every micro-batch carries its mini-batch's totals, so accumulated micro-batch gradients equal the unsplit
// mini-batch's (verl's known token-mean-under-accumulation pitfall).
// Each micro-batch gathers its rows of the experience's per-token tensors on the device, and the scalars the
// micro-batches and mini-batches produce stay there until the update ends (device-metric-log.ts): an update reads
// back once, whatever its number of micro-batches.
import type { Tensor } from '../../engine/index.ts';
import type { Rng } from '../../engine/rng.ts';
import type { TokenBatch } from '../../models/token-batch.ts';
import { checkLossAggMode, type LossAggregation } from '../../kernels/ppo/ppo-vocabulary.ts';
import { blocks, planMicroBatches, sequenceLengths, type MicroBatching } from './micro-batches.ts';
import type { ExperienceRows, SequenceBufferPool, SequenceBuffers } from './sequence-buffers.ts';
import type { AdamWOptimizer } from './adamw-optimizer.ts';
import { MetricAccumulator } from './metric-accumulator.ts';
import type { DeviceMetricLog } from './device-metric-log.ts';
import { checkFinite } from './finite-guard.ts';

export interface ScheduleConfig extends MicroBatching {
  epochs: number;
  miniBatchSize: number;
  shuffle: boolean;
  lossAggMode: string;
  /** seq-mean-token-sum-norm's constant divisor (actor/critic.loss_scale_factor); null: each micro-batch's longest
   *  response, the width verl pads a micro-batch to. */
  lossScaleFactor?: number | null;
  /** This step's learning rate (ppo/algorithm/lr-schedule.ts). */
  lr: number;
}

/** What the loop reads of the experience: N sequences with R response columns, their token rows and (N, R)
 *  response mask, on the host (the aggregation's token counts) and on the device (what the micro-batches gather). */
export interface UpdateExperience {
  N: number;
  R: number;
  rollout: ExperienceRows;
  responseMask: Float32Array;
  tensors: { mask: Tensor };
}

/** The model side of an update: its optimizer, the buffers its micro-batches fill, the log its scalars wait in
 *  until the update ends, its grad-norm metric. */
export interface UpdateTarget {
  optimizer: AdamWOptimizer;
  pool: SequenceBufferPool;
  log: DeviceMetricLog;
  gradNormMetric: string;
}

/** One micro-batch, its sequences uploaded and its response mask gathered. */
export interface MicroBatch {
  /** The mini-batch's rows: its summed metrics add up under this key. */
  miniBatchRows: readonly number[];
  /** The loss aggregation denominators of the whole mini-batch. */
  aggregation: LossAggregation;
  /** The micro-batch's rows of the experience. */
  rows: number[];
  /** Its buffers (its window: buffers.S, buffers.R) and its uploaded token batch. */
  buffers: SequenceBuffers;
  batch: TokenBatch;
}

/** The per-micro-batch step: forward, loss and backward into the optimizer's gradients; its scalars recorded in
 *  the log, whose consumers add them to the metrics when the update ends. */
export type MicroBatchStep = (micro: MicroBatch, log: DeviceMetricLog, metrics: MetricAccumulator) => Promise<void>;

/** One update over the experience; returns the metrics the micro-batch steps recorded and the gradient norm. */
export async function runUpdate(
  x: UpdateExperience,
  config: ScheduleConfig,
  rng: Rng,
  target: UpdateTarget,
  lossAndBackward: MicroBatchStep,
): Promise<Record<string, number>> {
  const { optimizer, pool, log, gradNormMetric } = target;
  if (x.N % config.miniBatchSize !== 0)
    throw new Error(
      `ppo_mini_batch_size × rollout.n = ${config.miniBatchSize} does not divide the ${x.N} sequences of a step`,
    );
  const metrics = new MetricAccumulator();
  const lengths = sequenceLengths(x.rollout).response;
  log.clear();
  for (let epoch = 0; epoch < config.epochs; epoch++) {
    const order = config.shuffle ? permutation(x.N, rng) : Array.from({ length: x.N }, (_, i) => i);
    for (const miniBatchRows of blocks(order, config.miniBatchSize)) {
      const microBatches = planMicroBatches(miniBatchRows, x.rollout, config);
      const aggregation = miniBatchAggregation(config.lossAggMode, x.responseMask, miniBatchRows, x.R);
      optimizer.zeroGrad();
      for (const { rows, promptLength, responseLength } of microBatches) {
        const buffers = pool.get(rows.length, promptLength + responseLength, responseLength);
        const batch = buffers.uploadSequences(x.rollout, rows);
        buffers.gatherResponse(buffers.responseMask, x.tensors.mask);
        const lossScaleFactor = config.lossScaleFactor ?? longestResponse(lengths, rows);
        await lossAndBackward(
          { miniBatchRows, aggregation: { ...aggregation, lossScaleFactor }, rows, buffers, batch },
          log,
          metrics,
        );
      }
      await optimizer.step(config.lr);
      log.record(optimizer.normSquared, ([normSquared]) => {
        const gradNorm = Math.sqrt(normSquared);
        checkFinite(gradNormMetric, gradNorm);
        metrics.addMean(gradNormMetric, gradNorm, 1);
      });
    }
  }
  await log.flush();
  return metrics.result();
}

/** Fisher–Yates from the last index down: one rng draw per index. */
function permutation(n: number, rng: Rng): number[] {
  const order = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(rng.next() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  return order;
}

/** verl's default loss_scale_factor: the response width of the micro-batch (observations included), at least 1. */
function longestResponse(lengths: readonly number[], rows: readonly number[]): number {
  return Math.max(1, ...rows.map((row) => lengths[row]));
}

/** Mini-batch aggregation denominators as verl 1dda039b's trainer passes them (global_batch_info): the mini-batch's
 *  valid tokens and all its rows (ppo_mini_batch_size × rollout.n, empty ones included); loss_scale_factor is set
 *  per micro-batch by runUpdate (R here). */
export function miniBatchAggregation(
  mode: string,
  responseMask: Float32Array,
  rows: readonly number[],
  R: number,
): LossAggregation {
  let tokens = 0;
  for (const row of rows) for (let t = 0; t < R; t++) tokens += responseMask[row * R + t];
  // An all-masked mini-batch has zero loss; a denominator of 1 keeps its weights finite (and zero).
  return {
    mode: checkLossAggMode(mode),
    batchNumTokens: Math.max(1, tokens),
    globalBatchSize: Math.max(1, rows.length),
    lossScaleFactor: R,
    dpSize: 1,
  };
}
