// A causal language model: the decoder trunk plus the fused LM head. Produces per-token log-probs of given
// targets (and entropy) without materialising B×T×V probabilities, and back-propagates d(loss)/d(log-prob) and
// d(loss)/d(entropy) into parameter gradients.
import type { Engine, Tensor, Arena } from '../engine/index.ts';
import type { DecoderConfig } from './hf-config.ts';
import { DecoderTrunk } from './decoder.ts';
import { GrowingBuffers } from './growing-buffers.ts';
import { lmHeadWeightName } from './parameter-layout.ts';
import type { TokenBatch } from './token-batch.ts';
import { lmHeadForward, lmHeadBackward, lmHeadLogits, lmHeadLogitsFitOneChunk } from '../kernels/layers/lm-head.ts';

export interface TokenLogprobs {
  logprobs: Tensor; // (R) log p(target[r] | tokens ≤ r)
  entropy: Tensor; //  (R)
  lse: Tensor; //      (R)
  /** (R) Σ_v π_v² of each position's distribution, when asked for (verl's calculate_sum_pi_squared). */
  sumPiSquared?: Tensor;
}

interface HeadWorkspace extends TokenLogprobs {
  dHidden: Tensor; // (R, C)
}

export class CausalLm {
  readonly trunk: DecoderTrunk;
  private readonly buffers: GrowingBuffers;
  /** The last tokenLogprobs call; `savedLogits` (R, V) while its logits wait for the one backward that reads them. */
  private last: {
    rows: number;
    hidden: Tensor;
    targets: Tensor<'u32'>;
    temperature: number;
    savedLogits?: Tensor;
  } | null = null;

  constructor(
    readonly engine: Engine,
    readonly config: DecoderConfig,
    readonly params: Arena,
  ) {
    if (config.head !== 'causal-lm') throw new Error(`CausalLm needs a causal-lm config, got ${config.head}`);
    this.trunk = new DecoderTrunk(engine, config, params);
    this.buffers = new GrowingBuffers(engine, 'lm');
  }

  private workspace(rows: number): HeadWorkspace {
    const b = this.buffers;
    return {
      logprobs: b.get('logprobs', [rows]),
      entropy: b.get('entropy', [rows]),
      lse: b.get('lse', [rows]),
      dHidden: b.get('dHidden', [rows, this.config.hiddenSize]),
    };
  }

  /** Teacher-forced log-probs of `targets` (R = B·T, usually the ids shifted left by one) at `temperature`;
   *  `sumPiSquared` also gives Σπ² per position (forward only: no gradient flows through it). */
  tokenLogprobs(
    batch: TokenBatch,
    targets: Tensor<'u32'>,
    options: { temperature?: number; saveForBackward: boolean; sumPiSquared?: boolean },
  ): TokenLogprobs {
    const c = this.config;
    const rows = batch.B * batch.T;
    const temperature = options.temperature ?? 1;
    const hidden = this.trunk.forward(batch, { saveForBackward: options.saveForBackward });
    const ws = this.workspace(rows);
    // A small vocabulary's logits stay for the backward instead of being recomputed there.
    const savedLogits =
      options.saveForBackward && lmHeadLogitsFitOneChunk(this.engine, rows, c.hiddenSize, c.vocabSize)
        ? this.buffers.get('savedLogits', [rows, c.vocabSize])
        : undefined;
    const sumPiSquared = options.sumPiSquared ? this.buffers.get('sumPiSquared', [rows]) : undefined;
    lmHeadForward(this.engine, {
      hidden,
      weight: this.params.get(lmHeadWeightName(c)),
      targets,
      N: rows,
      C: c.hiddenSize,
      V: c.vocabSize,
      temperature,
      logprobs: ws.logprobs,
      entropy: ws.entropy,
      lse: ws.lse,
      savedLogits,
      sumPiSquared,
    });
    this.last = { rows, hidden, targets, temperature, savedLogits };
    return { ...ws, sumPiSquared };
  }

  /** Accumulates parameter gradients of Σ dLogprobs·logprobs + Σ dEntropy·entropy for the last tokenLogprobs call
   *  (with LoRA adapters on the trunk: only theirs, into `grads` of their layout; the head is frozen). */
  backward(dLogprobs: Tensor, dEntropy: Tensor | null, grads: Arena): void {
    if (!this.last) throw new Error('CausalLm.backward: call tokenLogprobs(..., {saveForBackward: true}) first');
    const c = this.config;
    const { rows, hidden, targets, temperature, savedLogits } = this.last;
    const ws = this.workspace(rows);
    const weightName = lmHeadWeightName(c);
    lmHeadBackward(this.engine, {
      hidden,
      weight: this.params.get(weightName),
      targets,
      lse: ws.lse,
      dLogprobs,
      dEntropy,
      entropy: dEntropy ? ws.entropy : undefined,
      dHidden: ws.dHidden,
      dWeight: this.trunk.lora ? null : grads.get(weightName),
      N: rows,
      C: c.hiddenSize,
      V: c.vocabSize,
      temperature,
      savedLogits,
    });
    // The backward overwrote them with d(loss)/d(logits): another backward of this forward recomputes them.
    this.last.savedLogits = undefined;
    this.trunk.backward(ws.dHidden, grads);
  }

  /** Full logits (R, V) — for parity checks, the forward tool and sampling; not for training. */
  logits(batch: TokenBatch, out: Tensor<'f32'>): Tensor<'f32'> {
    const c = this.config;
    const hidden = this.trunk.forward(batch, { saveForBackward: false });
    lmHeadLogits(this.engine, {
      hidden,
      weight: this.params.get(lmHeadWeightName(c)),
      out,
      N: batch.B * batch.T,
      C: c.hiddenSize,
      V: c.vocabSize,
    });
    return out;
  }
}
