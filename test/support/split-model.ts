// The small Qwen3 that the binding-split tests share: its 1000-row embedding (128 KiB in float32) needs several
// windows on an engine that binds at most SPLIT_BYTES, and random parameters (norms near 1) that both the split
// and the unsplit engine load, with one left-padded batch of two rows.
import { seededRandom } from './arrays.ts';
import { elementCount } from '../../engine/index.ts';
import { parseHfConfig } from '../../models/hf-config.ts';
import { parameterEntries } from '../../models/parameter-layout.ts';

export const SPLIT_BYTES = 16384;

export const splitModelConfig = parseHfConfig({
  architectures: ['Qwen3ForCausalLM'],
  vocab_size: 1000,
  hidden_size: 32,
  intermediate_size: 48,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 8,
  rms_norm_eps: 1e-6,
  tie_word_embeddings: true,
});

export function randomSplitModelParameters(): Map<string, Float32Array> {
  const random = seededRandom(5);
  const values = new Map<string, Float32Array>();
  for (const entry of parameterEntries(splitModelConfig)) {
    const data = new Float32Array(elementCount(entry.shape));
    for (let i = 0; i < data.length; i++)
      data[i] = entry.name.includes('norm') ? 1 + 0.2 * (random() - 0.5) : 0.6 * (random() - 0.5);
    values.set(entry.name, data);
  }
  return values;
}

export const splitModelBatch = {
  inputIds: [
    [3, 997, 1, 522, 129, 4, 640],
    [0, 0, 5, 811, 2, 999, 128],
  ],
  attentionMask: [
    [1, 1, 1, 1, 1, 1, 1],
    [0, 0, 1, 1, 1, 1, 1],
  ],
};
/** Rows of that batch (2 × 7). */
export const SPLIT_MODEL_ROWS = 14;
