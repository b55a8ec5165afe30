// Supervised fine-tuning (next-token cross-entropy on response tokens): the SFT job (ppo/jobs/sft-job-node.ts, verl's
// fsdp_sft_trainer), the warm start of the PPO job, and the foundation's proof that forward, backward and AdamW train
// a model. A step's loss is verl's: each micro-batch's mean over its loss tokens, averaged over the step's
// micro-batches, whose gradients accumulate before one AdamW update.
import type { Engine, Tensor } from '../../engine/index.ts';
import type { CausalLm } from '../../models/causal-lm.ts';
import { uploadTokenBatch, type TokenBatch } from '../../models/token-batch.ts';
import { weightedSum } from '../../kernels/layers/lm-head.ts';
import type { AdamWOptimizer } from '../training/adamw-optimizer.ts';
import { checkFinite } from '../training/finite-guard.ts';

export interface SftExample {
  prompt: readonly number[];
  response: readonly number[];
  /** Per response token: 1 = trained on, 0 = context only (a multi-turn observation); absent: all 1. */
  responseMask?: readonly number[];
}

export interface SftStepResult {
  step: number;
  loss: number;
  /** Real (non-pad) tokens processed per second in this step, forward + backward + update. */
  tokensPerSecond: number;
  ms: number;
}

/**
 * Right-padded sequences of prompt + response with a loss mask on the response's next-token predictions; the loss
 * weights are −mask / (loss tokens) × `scale` (1 / micro-batches when gradients accumulate).
 */
export function buildSftBatch(examples: readonly SftExample[], T: number, padId: number, scale = 1) {
  const inputIds: number[][] = [];
  const attentionMask: number[][] = [];
  const targets = new Uint32Array(examples.length * T);
  const lossWeights = new Float32Array(examples.length * T);
  let lossTokens = 0;
  let realTokens = 0;
  examples.forEach((ex, b) => {
    const ids = [...ex.prompt, ...ex.response];
    if (ids.length > T) throw new Error(`SFT example ${b}: ${ids.length} tokens exceed the sequence length ${T}`);
    realTokens += ids.length;
    inputIds.push([...ids, ...new Array(T - ids.length).fill(padId)]);
    attentionMask.push(ids.map(() => 1).concat(new Array(T - ids.length).fill(0)));
    if (ex.responseMask && ex.responseMask.length !== ex.response.length) {
      throw new Error(
        `SFT example ${b}: responseMask has ${ex.responseMask.length} entries for ${ex.response.length} response ` +
          `tokens`,
      );
    }
    for (let t = 0; t + 1 < ids.length; t++) {
      targets[b * T + t] = ids[t + 1];
      const r = t + 1 - ex.prompt.length;
      if (r >= 0 && (ex.responseMask?.[r] ?? 1) === 1) {
        lossWeights[b * T + t] = 1;
        lossTokens++;
      }
    }
  });
  for (let i = 0; i < lossWeights.length; i++) lossWeights[i] = (-lossWeights[i] * scale) / Math.max(1, lossTokens);
  return { host: { inputIds, attentionMask }, targets, lossWeights, realTokens };
}

/** Runs one SFT step per call; keeps its GPU buffers between calls (fixed batch shape). */
export class SftTrainer {
  private batch: TokenBatch | undefined;
  private readonly targets: Tensor<'u32'>;
  private readonly dLogprobs: Tensor;
  private readonly loss: Tensor;
  private step = 0;

  constructor(
    private readonly engine: Engine,
    private readonly model: CausalLm,
    private readonly optimizer: AdamWOptimizer,
    private readonly shape: { B: number; T: number; padId: number },
  ) {
    const rows = shape.B * shape.T;
    this.targets = engine.tensor('sft.targets', [rows], 'u32');
    this.dLogprobs = engine.tensor('sft.dLogprobs', [rows]);
    this.loss = engine.tensor('sft.loss', [1]);
  }

  /** Forward (and with `train`, backward) of one micro-batch; returns its mean loss × scale. */
  private async micro(
    examples: readonly SftExample[],
    train: boolean,
    scale: number,
  ): Promise<{ loss: number; realTokens: number }> {
    const { B, T, padId } = this.shape;
    if (examples.length !== B) throw new Error(`SFT micro-batch: ${examples.length} examples, its size is ${B}`);
    const built = buildSftBatch(examples, T, padId, scale);
    const e = this.engine;
    this.batch = uploadTokenBatch(e, built.host, this.model.config.vocabSize, 'sft', this.batch);
    e.upload(this.targets, built.targets);
    e.upload(this.dLogprobs, built.lossWeights);
    const out = this.model.tokenLogprobs(this.batch, this.targets, { saveForBackward: train });
    // loss = Σ logprobs · (−mask / count): the same weights are d(loss)/d(logprobs).
    weightedSum(e, { values: out.logprobs, weights: this.dLogprobs, out: this.loss, n: B * T });
    if (train) this.model.backward(this.dLogprobs, null, this.optimizer.grads);
    const [loss] = await e.read(this.loss);
    return { loss, realTokens: built.realTokens };
  }

  /** One AdamW step whose gradient is the mean over `microBatches` (each of B examples) of their mean token loss. */
  async trainStep(examples: readonly SftExample[], lr?: number, microBatches = 1): Promise<SftStepResult> {
    const { B } = this.shape;
    if (examples.length !== B * microBatches)
      throw new Error(`SFT step: ${examples.length} examples, expected ${microBatches} micro-batches of ${B}`);
    const start = performance.now();
    this.optimizer.zeroGrad();
    let loss = 0;
    let realTokens = 0;
    for (let m = 0; m < microBatches; m++) {
      const part = await this.micro(examples.slice(m * B, (m + 1) * B), true, 1 / microBatches);
      loss += part.loss;
      realTokens += part.realTokens;
    }
    // A diverging step stops before the optimizer applies it: the weights stay the last good step's.
    checkFinite('train/loss', loss);
    await this.optimizer.step(lr);
    const ms = performance.now() - start;
    this.step++;
    return { step: this.step, loss, tokensPerSecond: realTokens / (ms / 1000), ms };
  }

  /** Mean token loss of each whole micro-batch of `examples`, averaged (verl's validation loss); no update. */
  async evaluate(examples: readonly SftExample[]): Promise<number> {
    const { B } = this.shape;
    const count = Math.floor(examples.length / B);
    if (count === 0) throw new Error(`SFT validation: ${examples.length} examples, fewer than a micro-batch of ${B}`);
    let loss = 0;
    for (let m = 0; m < count; m++) loss += (await this.micro(examples.slice(m * B, (m + 1) * B), false, 1)).loss;
    return loss / count;
  }
}
