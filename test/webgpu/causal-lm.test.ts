// The causal LM (trunk + fused LM head) end to end: with tied embeddings, the embedding's gradient must be the
// sum of what the LM head and the token embedding contribute — checked against the same model untied, whose
// lm_head.weight holds a copy of the embedding.
import { describe, it } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { expectClose, seededRandom } from '../support/arrays.ts';
import { parseHfConfig } from '../../models/hf-config.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { parameterEntries } from '../../models/parameter-layout.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { uploadTokenBatch } from '../../models/token-batch.ts';
import { Arena, elementCount } from '../../engine/index.ts';

function config(tied: boolean) {
  return parseHfConfig({
    architectures: ['Qwen3ForCausalLM'],
    vocab_size: 23,
    hidden_size: 16,
    intermediate_size: 20,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    head_dim: 8,
    rms_norm_eps: 1e-6,
    tie_word_embeddings: tied,
  });
}

describe('causal LM with tied embeddings', () => {
  it('accumulates LM-head and embedding gradients into the one shared matrix', async () => {
    const engine = await gpuEngine();
    const random = seededRandom(11);
    const untied = config(false);
    const values = new Map<string, Float32Array>();
    for (const entry of parameterEntries(untied)) {
      const data = new Float32Array(elementCount(entry.shape));
      for (let i = 0; i < data.length; i++)
        data[i] = entry.name.includes('norm') ? 1 + 0.2 * (random() - 0.5) : 0.5 * (random() - 0.5);
      values.set(entry.name, data);
    }
    values.set('lm_head.weight', values.get('model.embed_tokens.weight')!.slice());
    const tied = config(true);
    const tiedValues = new Map([...values].filter(([name]) => name !== 'lm_head.weight'));

    const inputIds = [
      [3, 7, 1, 22, 9, 4],
      [0, 0, 5, 11, 2, 8],
    ];
    const attentionMask = [
      [1, 1, 1, 1, 1, 1],
      [0, 0, 1, 1, 1, 1],
    ];
    const targets = new Uint32Array(12);
    const weights = new Float32Array(12);
    inputIds.forEach((row, b) =>
      row.slice(1).forEach((id, t) => {
        targets[b * 6 + t] = id;
        weights[b * 6 + t] = attentionMask[b][t] * (random() - 0.3);
      }),
    );
    const grads = async (c: typeof tied, v: Map<string, Float32Array>, label: string) => {
      const params = createParameterArena(engine, c, label);
      uploadArenaTensors(engine, params, v);
      const lm = new CausalLm(engine, c, params);
      const batch = uploadTokenBatch(engine, { inputIds, attentionMask }, c.vocabSize, label);
      lm.tokenLogprobs(batch, engine.tensorFrom(`${label}.targets`, [12], targets, 'u32'), { saveForBackward: true });
      const g = new Arena(engine, `${label}.grads`, params.layout);
      lm.backward(
        engine.tensorFrom(`${label}.d`, [12], weights),
        engine.tensorFrom(
          `${label}.dh`,
          [12],
          weights.map((w) => 0.5 * w),
        ),
        g,
      );
      return g;
    };
    const gTied = await grads(tied, tiedValues, 'tied');
    const gUntied = await grads(untied, values, 'untied');
    const embed = await engine.read(gUntied.get('model.embed_tokens.weight'));
    const head = await engine.read(gUntied.get('lm_head.weight'));
    const expected = embed.map((x, i) => x + head[i]);
    expectClose(
      await engine.read(gTied.get('model.embed_tokens.weight')),
      expected,
      1e-6,
      1e-4,
      'tied embedding gradient',
    );
    expectClose(
      await engine.read(gTied.get('model.norm.weight')),
      await engine.read(gUntied.get('model.norm.weight')),
      1e-6,
      1e-4,
      'final norm gradient',
    );
  });
});
