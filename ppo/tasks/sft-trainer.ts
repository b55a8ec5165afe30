// Supervised fine-tuning (next-token cross-entropy on response tokens): the warm start of the PPO job and the
// foundation's proof that forward, backward and AdamW train a model.
import type { Engine, Tensor } from '../../engine/index.ts';
import type { CausalLm } from '../../models/causal-lm.ts';
import { uploadTokenBatch, type TokenBatch } from '../../models/token-batch.ts';
import { weightedSum } from '../../kernels/layers/lm-head.ts';
import type { AdamWOptimizer } from '../update/adamw-optimizer.ts';

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

/** Right-padded sequences of prompt + response with a loss mask on the response's next-token predictions. */
export function buildSftBatch(examples: readonly SftExample[], T: number, padId: number) {
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
      throw new Error(`SFT example ${b}: responseMask has ${ex.responseMask.length} entries for ${ex.response.length} response tokens`);
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
  for (let i = 0; i < lossWeights.length; i++) lossWeights[i] = -lossWeights[i] / Math.max(1, lossTokens);
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

  async trainStep(examples: readonly SftExample[], lr?: number): Promise<SftStepResult> {
    const { B, T, padId } = this.shape;
    if (examples.length !== B) throw new Error(`SFT step: ${examples.length} examples, batch size is ${B}`);
    const start = performance.now();
    const built = buildSftBatch(examples, T, padId);
    const e = this.engine;
    this.batch = uploadTokenBatch(e, built.host, this.model.config.vocabSize, 'sft', this.batch);
    e.upload(this.targets, built.targets);
    e.upload(this.dLogprobs, built.lossWeights);

    this.optimizer.zeroGrad();
    const out = this.model.tokenLogprobs(this.batch, this.targets, { saveForBackward: true });
    // loss = Σ logprobs · (−mask / count): the same weights are d(loss)/d(logprobs).
    weightedSum(e, { values: out.logprobs, weights: this.dLogprobs, out: this.loss, n: B * T });
    this.model.backward(this.dLogprobs, null, this.optimizer.grads);
    this.optimizer.step(lr);
    const [loss] = await e.read(this.loss);
    const ms = performance.now() - start;
    this.step++;
    return { step: this.step, loss, tokensPerSecond: built.realTokens / (ms / 1000), ms };
  }
}
