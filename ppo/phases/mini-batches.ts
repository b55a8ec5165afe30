// The update schedule shared by actor and critic: ppo_epochs passes over the experience, each split into
// mini-batches (one optimizer step each) and those into micro-batches (gradient accumulation). The loss
// aggregation of every micro-batch carries its mini-batch's totals, so accumulated micro-batch gradients equal
// the unsplit mini-batch's (verl's known token-mean-under-accumulation pitfall). Micro-batches hold a fixed
// number of sequences, or (use_dynamic_bsz) as many as a token budget allows, each padded only to its own
// longest prompt and response.
import type { Rng } from '../../engine/rng.ts';
import type { TokenBatch } from '../../models/token-batch.ts';
import { checkLossAggMode, type LossAggregation } from '../../kernels/ppo-vocabulary.ts';
import { blocks, type SequenceBufferPool, type SequenceBuffers } from './sequence-buffers.ts';
import type { AdamWOptimizer } from './adamw-optimizer.ts';
import type { Experience } from './experience.ts';
import type { MetricAccumulator } from './metric-accumulator.ts';
import type { ExperienceRows } from './sequence-buffers.ts';
import { checkFinite } from './finite-guard.ts';

/** Rows of the experience and the window of columns they keep: the last promptLength prompt columns and the
 *  first responseLength response columns. */
export interface MicroBatchPlan {
  rows: number[];
  promptLength: number;
  responseLength: number;
}

export interface MiniBatchPlan {
  epoch: number;
  /** Row indices of the experience, in mini-batch order. */
  rows: number[];
  microBatches: MicroBatchPlan[];
  aggregation: LossAggregation;
}

/** Sequences per micro-batch (null: all at once), or with `maxTokens` (use_dynamic_bsz) a token budget, padding included. */
export interface MicroBatching {
  microBatchSize: number | null;
  maxTokens?: number | null;
  /** The config key of maxTokens, for errors. */
  maxTokensKey?: string;
}

export interface ScheduleConfig extends MicroBatching {
  epochs: number;
  miniBatchSize: number;
  shuffle: boolean;
  lossAggMode: string;
}

/** Each row's real prompt tokens and response tokens (generated and observations). */
export function sequenceLengths(rows: ExperienceRows): { prompt: number[]; response: number[] } {
  const P = rows.promptLength;
  const count = (row: readonly number[], from: number, to: number) => row.slice(from, to).reduce((n, m) => n + (m ? 1 : 0), 0);
  return {
    prompt: rows.attentionMask.map((m) => count(m, 0, P)),
    response: rows.attentionMask.map((m) => count(m, P, m.length)),
  };
}

/**
 * Splits `rows` into micro-batches. A fixed size keeps the experience's full window (and the rows' order). A token
 * budget is verl's rearrange_micro_batches for padded batches: verl packs sequences without padding and balances
 * their summed lengths; here a micro-batch is padded to its longest prompt and longest response, so rows go longest
 * first and each micro-batch takes rows while rows × (longest prompt + longest response) stays within the budget —
 * similar lengths together, little padding, never more tokens than the budget.
 */
export function planMicroBatches(rows: readonly number[], experience: ExperienceRows, split: MicroBatching): MicroBatchPlan[] {
  const P = experience.promptLength;
  const R = experience.responseLength;
  if (!split.maxTokens) return blocks(rows, split.microBatchSize ?? rows.length).map((r) => ({ rows: r, promptLength: P, responseLength: R }));
  const budget = split.maxTokens;
  const lengths = sequenceLengths(experience);
  // A row needs one response column even when empty: the gathers and losses need R ≥ 1.
  const prompt = (i: number) => Math.max(1, lengths.prompt[i]);
  const response = (i: number) => Math.max(1, lengths.response[i]);
  const order = [...rows].sort((a, b) => prompt(b) + response(b) - (prompt(a) + response(a)) || a - b);
  const plans: MicroBatchPlan[] = [];
  for (const i of order) {
    if (prompt(i) + response(i) > budget) {
      throw new Error(`${split.maxTokensKey ?? 'max_token_len'}=${budget} is below sequence ${i}'s ${prompt(i) + response(i)} tokens: raise it to at least the longest prompt + response`);
    }
    const last = plans.at(-1);
    if (last) {
      const promptLength = Math.max(last.promptLength, prompt(i));
      const responseLength = Math.max(last.responseLength, response(i));
      if ((last.rows.length + 1) * (promptLength + responseLength) <= budget) {
        last.rows.push(i);
        last.promptLength = promptLength;
        last.responseLength = responseLength;
        continue;
      }
    }
    plans.push({ rows: [i], promptLength: prompt(i), responseLength: response(i) });
  }
  return plans;
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

export function* miniBatches(x: Pick<Experience, 'N' | 'R' | 'responseMask' | 'rollout'>, config: ScheduleConfig, rng: Rng): Generator<MiniBatchPlan> {
  const { N, R, responseMask } = x;
  if (N % config.miniBatchSize !== 0) throw new Error(`ppo_mini_batch_size × rollout.n = ${config.miniBatchSize} does not divide the ${N} sequences of a step`);
  for (let epoch = 0; epoch < config.epochs; epoch++) {
    const order = config.shuffle ? permutation(N, rng) : Array.from({ length: N }, (_, i) => i);
    for (const rows of blocks(order, config.miniBatchSize)) {
      yield {
        epoch, rows,
        microBatches: planMicroBatches(rows, x.rollout, config),
        aggregation: miniBatchAggregation(config.lossAggMode, responseMask, rows, R),
      };
    }
  }
}

export interface MicroBatch {
  mini: MiniBatchPlan;
  rows: number[];
  /** The micro-batch's buffers (its window: buffers.S, buffers.R), its sequences and response mask uploaded. */
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
  for (const mini of miniBatches(x, config, rng)) {
    optimizer.zeroGrad();
    for (const { rows, promptLength, responseLength } of mini.microBatches) {
      const buffers = pool.get(rows.length, promptLength + responseLength, responseLength);
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
