// Scalar heads on the decoder trunk. A critic (HF *ForTokenClassification, num_labels=1) predicts a value per
// token: score.weight [1, C] and score.bias [1] on the final hidden state. A reward model (HF
// *ForSequenceClassification) has a bias-free score and is read at each row's rightmost non-pad token; both train
// (the reward model on preference pairs, ppo/reward-model/).
import type { Engine, Tensor, Arena } from '../engine/index.ts';
import type { DecoderConfig } from './hf-config.ts';
import { rowWindow } from './row-chunks.ts';
import { DecoderTrunk } from './decoder.ts';
import { GrowingBuffers } from './growing-buffers.ts';
import type { TokenBatch } from './token-batch.ts';
import { valueHeadForward, valueHeadBackward } from '../kernels/layers/value-head.ts';

export class ValueModel {
  readonly trunk: DecoderTrunk;
  private readonly workspace: GrowingBuffers;
  private readonly zeroBias: Tensor;
  /** Where a reward model's backward puts the gradient of its absent bias (discarded). */
  private readonly unusedBiasGrad: Tensor;
  private last: { rows: number; hidden: Tensor } | null = null;

  constructor(
    readonly engine: Engine,
    readonly config: DecoderConfig,
    readonly params: Arena,
  ) {
    if (config.head === 'causal-lm')
      throw new Error(`ValueModel needs a classification head, got ${config.architecture}`);
    this.trunk = new DecoderTrunk(engine, config, params);
    this.zeroBias = engine.tensor('reward.score.zero-bias', [1]);
    this.unusedBiasGrad = engine.tensor('reward.score.unused-bias-grad', [1]);
    this.workspace = new GrowingBuffers(engine, 'values');
  }

  private buffers(rows: number) {
    return {
      values: this.workspace.get('values', [rows]),
      dHidden: this.workspace.get('dHidden', [rows, this.config.hiddenSize]),
    };
  }

  /** Where `score` lives: the LoRA arena when the adapters train it (PEFT's modules_to_save, a LoRA critic), else
   *  the model's own parameters. Its gradient goes to the same names in whichever arena `backward` is given. */
  private get head(): Arena {
    const lora = this.trunk.lora;
    return lora?.params.has('score.weight') ? lora.params : this.params;
  }

  private get bias(): Tensor {
    return this.config.head === 'token-classification' ? this.head.get('score.bias') : this.zeroBias;
  }

  /** Per-token scores (R = B·T): the critic's values, or the reward model's score at every position. */
  tokenValues(batch: TokenBatch, options: { saveForBackward: boolean }): Tensor<'f32'> {
    const rows = batch.B * batch.T;
    const hidden = this.trunk.forward(batch, options);
    const { values } = this.buffers(rows);
    // Over the trunk's row windows when (R, C) is above one binding (models/row-chunks.ts).
    for (const chunk of this.trunk.rowChunks(rows))
      valueHeadForward(this.engine, {
        hidden: rowWindow(hidden, this.config.hiddenSize, chunk, rows),
        weight: this.head.get('score.weight'),
        bias: this.bias,
        values: rowWindow(values, 1, chunk, rows),
        N: chunk.rows,
        C: this.config.hiddenSize,
      });
    this.last = { rows, hidden };
    return values;
  }

  /**
   * Accumulates parameter gradients of Σ dValues·values for the last tokenValues call (critic or reward-model
   * training).
   */
  backward(dValues: Tensor, grads: Arena): void {
    if (!this.last) throw new Error('ValueModel.backward: call tokenValues(..., {saveForBackward: true}) first');
    const { rows, hidden } = this.last;
    const { dHidden } = this.buffers(rows);
    for (const chunk of this.trunk.rowChunks(rows))
      valueHeadBackward(this.engine, {
        hidden: rowWindow(hidden, this.config.hiddenSize, chunk, rows),
        weight: this.head.get('score.weight'),
        dValues: rowWindow(dValues, 1, chunk, rows),
        dHidden: rowWindow(dHidden, this.config.hiddenSize, chunk, rows),
        dWeight: grads.get('score.weight'),
        dBias: this.config.head === 'token-classification' ? grads.get('score.bias') : this.unusedBiasGrad,
        N: chunk.rows,
        C: this.config.hiddenSize,
      });
    this.trunk.backward(dHidden, grads);
  }

  /** Reward model: one score per row, read at its rightmost non-pad token (HF's sequence classifier). */
  async sequenceScores(batch: TokenBatch, attentionMask: readonly (readonly number[])[]): Promise<number[]> {
    const values = await this.engine.read(this.tokenValues(batch, { saveForBackward: false }));
    return attentionMask.map((mask, b) => {
      const last = mask.lastIndexOf(1);
      if (last < 0) throw new Error(`reward model: row ${b} has no real token`);
      return values[b * batch.T + last];
    });
  }
}
