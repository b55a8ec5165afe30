// Reward-model training on preference pairs: a *ForSequenceClassification (ValueModel with a bias-free score) reads
// the chosen and the rejected answer of each pair in one batch, and the fused pairwise-loss kernel turns the scores
// at each row's last non-pad token into the Bradley–Terry loss, its gradient and TRL's metrics. A train batch of
// pairs is split into micro-batches whose gradients accumulate before one AdamW step. Browser-safe.
import type { Engine, Tensor } from '../../engine/index.ts';
import type { ValueModel } from '../../models/value-model.ts';
import { uploadTokenBatch, type TokenBatch } from '../../models/token-batch.ts';
import { pairwiseLoss, PAIRWISE_STATS } from '../../kernels/ppo/pairwise-loss.ts';
import type { AdamWOptimizer } from '../training/adamw-optimizer.ts';
import { checkFinite } from '../training/finite-guard.ts';
import type { PreferencePair } from './preference-pairs.ts';

/** TRL's RewardTrainer metrics, averaged over pairs. */
export interface PairMetrics {
  loss: number;
  accuracy: number;
  /** mean r_chosen − r_rejected. */
  margin: number;
}

export interface RewardStepResult extends PairMetrics {
  gradNorm: number;
}

/** Rows 0..P-1 the chosen answers, P..2P-1 the rejected, right-padded to T; `last` each row's last real position. */
export function buildPairBatch(pairs: readonly PreferencePair[], T: number, padId: number) {
  const rows = [...pairs.map((p) => p.chosen), ...pairs.map((p) => p.rejected)];
  const inputIds: number[][] = [];
  const attentionMask: number[][] = [];
  const last = new Uint32Array(rows.length);
  rows.forEach((ids, b) => {
    if (ids.length === 0 || ids.length > T)
      throw new Error(`reward-model batch row ${b}: ${ids.length} tokens, expected 1 to ${T}`);
    inputIds.push([...ids, ...new Array<number>(T - ids.length).fill(padId)]);
    attentionMask.push([...ids.map(() => 1), ...new Array<number>(T - ids.length).fill(0)]);
    last[b] = ids.length - 1;
  });
  return { host: { inputIds, attentionMask }, last, margin: Float32Array.from(pairs, (p) => p.margin) };
}

/** One micro-batch shape (P pairs of at most T tokens) whose GPU buffers are kept between calls. */
export class RewardModelTrainer {
  private batch: TokenBatch | undefined;
  private readonly last: Tensor<'u32'>;
  private readonly margin: Tensor;
  private readonly dValues: Tensor;
  private readonly stats: Tensor;

  constructor(
    private readonly engine: Engine,
    readonly model: ValueModel,
    private readonly optimizer: AdamWOptimizer | null,
    readonly shape: { P: number; T: number },
  ) {
    const { P, T } = shape;
    this.last = engine.tensor('rm.last', [2 * P], 'u32');
    this.margin = engine.tensor('rm.margin', [P]);
    this.dValues = engine.tensor('rm.dValues', [2 * P, T]);
    this.stats = engine.tensor('rm.stats', [3]);
  }

  private padId(): number {
    const pad = this.model.config.padTokenId;
    if (pad === null)
      throw new Error(`${this.model.config.architecture} needs pad_token_id to find each row's last token`);
    return pad;
  }

  /** Forward of P pairs and the pairwise loss; with `train`, also the backward (gradients accumulate). */
  private async micro(pairs: readonly PreferencePair[], train: boolean, gradScale: number): Promise<PairMetrics> {
    const { P, T } = this.shape;
    if (pairs.length !== P) throw new Error(`reward-model micro-batch: ${pairs.length} pairs, expected ${P}`);
    const built = buildPairBatch(pairs, T, this.padId());
    const e = this.engine;
    this.batch = uploadTokenBatch(e, built.host, this.model.config.vocabSize, 'rm', this.batch);
    e.upload(this.last, built.last);
    e.upload(this.margin, built.margin);
    const values = this.model.tokenValues(this.batch, { saveForBackward: train });
    pairwiseLoss(e, {
      values,
      last: this.last,
      margin: this.margin,
      dValues: this.dValues,
      stats: this.stats,
      P,
      T,
      gradScale,
    });
    if (train) this.model.backward(this.dValues, this.optimizer!.grads);
    const stats = await e.read(this.stats);
    return {
      loss: stats[PAIRWISE_STATS.loss],
      accuracy: stats[PAIRWISE_STATS.accuracy],
      margin: stats[PAIRWISE_STATS.margin],
    };
  }

  /** One AdamW step on `pairs` (a multiple of P), its gradient the mean over micro-batches of P pairs. */
  async trainStep(pairs: readonly PreferencePair[], lr: number): Promise<RewardStepResult> {
    if (!this.optimizer) throw new Error('RewardModelTrainer: no optimizer, evaluation only');
    const micro = chunks(pairs, this.shape.P);
    this.optimizer.zeroGrad();
    const metrics: PairMetrics[] = [];
    for (const part of micro) metrics.push(await this.micro(part, true, 1 / micro.length));
    const mean = meanMetrics(metrics);
    // A diverging step stops before the optimizer applies it: the weights stay the last good step's.
    checkFinite('train/loss', mean.loss);
    await this.optimizer.step(lr);
    return { ...mean, gradNorm: await this.optimizer.gradNorm() };
  }

  /** Held-out metrics over every whole micro-batch of `pairs` (a remainder short of P pairs is left out). */
  async evaluate(pairs: readonly PreferencePair[]): Promise<PairMetrics> {
    const whole = pairs.slice(0, pairs.length - (pairs.length % this.shape.P));
    if (whole.length === 0)
      throw new Error(
        `reward-model evaluation: ${pairs.length} held-out pairs, fewer than a micro-batch of ${this.shape.P}`,
      );
    const metrics: PairMetrics[] = [];
    for (const part of chunks(whole, this.shape.P)) metrics.push(await this.micro(part, false, 1));
    return meanMetrics(metrics);
  }
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  if (items.length === 0 || items.length % size !== 0)
    throw new Error(`reward-model batch: ${items.length} pairs is not a positive multiple of the micro-batch ${size}`);
  return Array.from({ length: items.length / size }, (_, i) => items.slice(i * size, (i + 1) * size));
}

function meanMetrics(metrics: readonly PairMetrics[]): PairMetrics {
  const mean = (key: keyof PairMetrics) => metrics.reduce((sum, m) => sum + m[key], 0) / metrics.length;
  return { loss: mean('loss'), accuracy: mean('accuracy'), margin: mean('margin') };
}
