// A causal language model: the decoder trunk plus the fused LM head. Produces per-token log-probs of given
// targets (and entropy) without materialising B×T×V probabilities, and back-propagates d(loss)/d(log-prob) and
// d(loss)/d(entropy) into parameter gradients.
import { alignedRows, type Engine, type Tensor, type Arena } from '../engine/index.ts';
import type { DecoderConfig } from './hf-config.ts';
import { chunkRows } from './row-chunks.ts';
import { DecoderTrunk } from './decoder.ts';
import { GrowingBuffers } from './growing-buffers.ts';
import { lmHeadWeightName } from './parameter-layout.ts';
import type { TokenBatch } from './token-batch.ts';
import {
  lmHeadForward,
  lmHeadBackward,
  lmHeadLogits,
  lmHeadLogitsFitOneChunk,
  type LogitGradPairs,
} from '../kernels/layers/lm-head.ts';
import { topLogprobs } from '../kernels/decode/top-logprobs.ts';
import { packRowSampling, ROW_SAMPLING_WORDS } from '../kernels/decode/sample.ts';

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
      options.saveForBackward &&
      lmHeadLogitsFitOneChunk(this.engine, this.trunk.rowChunks(rows)[0].rows, c.hiddenSize, c.vocabSize)
        ? this.buffers.get('savedLogits', [rows, c.vocabSize])
        : undefined;
    const sumPiSquared = options.sumPiSquared ? this.buffers.get('sumPiSquared', [rows]) : undefined;
    // Over the trunk's row windows when (R, C) is above one binding: every output is per row (models/row-chunks.ts).
    for (const chunk of this.trunk.rowChunks(rows)) {
      const r = chunkRows(chunk, rows);
      lmHeadForward(this.engine, {
        hidden: r(hidden, c.hiddenSize),
        weight: this.trunk.weights.get(lmHeadWeightName(c)),
        targets: r(targets),
        N: chunk.rows,
        C: c.hiddenSize,
        V: c.vocabSize,
        temperature,
        logprobs: r(ws.logprobs),
        entropy: r(ws.entropy),
        lse: r(ws.lse),
        savedLogits: r(savedLogits, c.vocabSize),
        sumPiSquared: r(sumPiSquared),
      });
    }
    this.last = { rows, hidden, targets, temperature, savedLogits };
    return { ...ws, sumPiSquared };
  }

  /** The last tokenLogprobs call's final hidden states (R, C), log-normalisers (R) of logits / temperature, and
   *  temperature: what a loss on other ids than the targets (on-policy distillation's top-k) reads of the forward. */
  lastForward(): { rows: number; hidden: Tensor; lse: Tensor; temperature: number } {
    if (!this.last) throw new Error('CausalLm.lastForward: call tokenLogprobs first');
    const { rows, hidden, temperature } = this.last;
    return { rows, hidden, lse: this.workspace(rows).lse, temperature };
  }

  /** Accumulates parameter gradients of Σ dLogprobs·logprobs + Σ dEntropy·entropy for the last tokenLogprobs call
   *  (with LoRA adapters on the trunk: only theirs, into `grads` of their layout; the head is frozen);
   *  `extraLogitGrads` adds sparse terms to its logits gradient (lm-head-sparse.wgsl). */
  backward(dLogprobs: Tensor, dEntropy: Tensor | null, grads: Arena, extraLogitGrads?: LogitGradPairs | null): void {
    if (!this.last) throw new Error('CausalLm.backward: call tokenLogprobs(..., {saveForBackward: true}) first');
    const c = this.config;
    const { rows, hidden, targets, temperature, savedLogits } = this.last;
    const ws = this.workspace(rows);
    const weightName = lmHeadWeightName(c);
    const chunks = this.trunk.rowChunks(rows);
    // The head's weight gradient sums over rows: window by window when the rows are windowed (models/row-chunks.ts).
    for (const chunk of chunks) {
      const r = chunkRows(chunk, rows);
      lmHeadBackward(this.engine, {
        hidden: r(hidden, c.hiddenSize),
        weight: this.trunk.weights.get(weightName),
        targets: r(targets),
        lse: r(ws.lse),
        dLogprobs: r(dLogprobs),
        dEntropy: r(dEntropy),
        entropy: dEntropy ? r(ws.entropy) : undefined,
        dHidden: r(ws.dHidden, c.hiddenSize),
        dWeight: this.trunk.lora ? null : grads.get(weightName),
        N: chunk.rows,
        C: c.hiddenSize,
        V: c.vocabSize,
        temperature,
        savedLogits: r(savedLogits, c.vocabSize),
        // Sparse terms are P (id, coefficient) pairs a row: the window's rows of them.
        extraLogitGrads: extraLogitGrads && {
          ids: r(extraLogitGrads.ids, extraLogitGrads.P),
          coefs: r(extraLogitGrads.coefs, extraLogitGrads.P),
          P: extraLogitGrads.P,
        },
      });
    }
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
      weight: this.trunk.weights.get(lmHeadWeightName(c)),
      out,
      N: batch.B * batch.T,
      C: c.hiddenSize,
      V: c.vocabSize,
    });
    return out;
  }

  /** The K most likely next tokens at every position (R = B·T) and their log-probs at temperature 1, into ids and
   *  logprobs (R, K): the decode top-logprobs kernel over the logits of about `chunkRows` positions at a time, so no
   *  (R, V) tensor is held (a teacher's top-k for on-policy distillation). */
  topLogprobs(batch: TokenBatch, K: number, ids: Tensor<'u32'>, logprobs: Tensor, chunkRows: number): void {
    const c = this.config;
    const rows = batch.B * batch.T;
    const hidden = this.trunk.forward(batch, { saveForBackward: false });
    // Chunks start on the device's storage offset alignment: a whole number of `step` rows of C floats.
    const align = this.engine.caps.minStorageBufferOffsetAlignment / 4;
    const step = alignedRows(c.hiddenSize, align);
    const chunk = Math.min(rows, Math.max(step, Math.floor(chunkRows / step) * step));
    const b = this.buffers;
    const logits = b.get('topLogits', [chunk, c.vocabSize]);
    const steps = b.get('topSteps', [chunk], 'u32', 0);
    const finished = b.get('topFinished', [chunk], 'u32', 0);
    for (let r0 = 0; r0 < rows; r0 += chunk) {
      const n = Math.min(chunk, rows - r0);
      // Each position is a "row" whose output row is its own index: one step (outStride 1), temperature 1.
      const sampling = new Uint32Array(n * ROW_SAMPLING_WORDS);
      for (let i = 0; i < n; i++)
        sampling.set(
          packRowSampling({ stream: 0, outRow: r0 + i, seed: 0, temperature: 1, topK: -1, topP: 1 }),
          i * ROW_SAMPLING_WORDS,
        );
      const rowSampling = b.get('topRowSampling', [chunk * ROW_SAMPLING_WORDS], 'u32');
      this.engine.upload(rowSampling.view(rowSampling.name, 0, [n * ROW_SAMPLING_WORDS]), sampling);
      const view = logits.view(logits.name, 0, [n, c.vocabSize]);
      lmHeadLogits(this.engine, {
        hidden: hidden.view(`${hidden.name}[${r0}:]`, r0 * c.hiddenSize, [n, c.hiddenSize]),
        weight: this.trunk.weights.get(lmHeadWeightName(c)),
        out: view,
        N: n,
        C: c.hiddenSize,
        V: c.vocabSize,
      });
      topLogprobs(this.engine, {
        logits: view,
        V: c.vocabSize,
        rows: n,
        rowSampling,
        steps: steps.view(steps.name, 0, [n]),
        finished: finished.view(finished.name, 0, [n]),
        topIds: ids,
        topLogprobs: logprobs,
        outStride: 1,
        K,
      });
    }
  }
}
