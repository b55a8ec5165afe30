// The small Qwen3 that the binding- and buffer-split tests share: its 1000-row embedding (128 KiB in float32) needs
// several windows on an engine that binds at most SPLIT_BYTES (several buffers below SPLIT_BUFFER_BYTES), and
// random parameters (norms near 1) that both the split and the unsplit engine load, with one left-padded batch of
// two rows; runSplitModel runs it forward, backward and one AdamW step.
import { seededRandom } from './arrays.ts';
import { elementCount, type Arena, type Engine } from '../../engine/index.ts';
import { parseHfConfig } from '../../models/hf-config.ts';
import { parameterEntries } from '../../models/parameter-layout.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { uploadTokenBatch } from '../../models/token-batch.ts';
import { lmHeadLogits } from '../../kernels/layers/lm-head.ts';
import { AdamWOptimizer } from '../../ppo/training/adamw-optimizer.ts';

export const SPLIT_BYTES = 16384;
/** A largest buffer of 32 KiB: the embedding in 4 buffers of at most 256 rows, each two bindings. */
export const SPLIT_BUFFER_BYTES = 32768;

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

export interface SplitModelOutputs {
  logprobs: Float32Array;
  entropy: Float32Array;
  logits: Float32Array;
  grads: Map<string, Float32Array>;
  updated: Map<string, Float32Array>;
  params: Arena;
  optimizer: AdamWOptimizer;
}

/** One forward (log-probs, entropies, two rows of full logits), backward and AdamW step of the split model on
 *  `engine`; the step starts from `stepGrads` when given (another engine's gradients), else from its own. */
export async function runSplitModel(
  engine: Engine,
  values: Map<string, Float32Array>,
  stepGrads?: Map<string, Float32Array>,
): Promise<SplitModelOutputs> {
  const { inputIds, attentionMask } = splitModelBatch;
  const R = SPLIT_MODEL_ROWS;
  const params = createParameterArena(engine, splitModelConfig, 'split-test');
  uploadArenaTensors(engine, params, values);
  const lm = new CausalLm(engine, splitModelConfig, params);
  const random = seededRandom(9);
  const targets = new Uint32Array(R);
  const dLogprobs = new Float32Array(R);
  inputIds.forEach((row, b) =>
    row.forEach((_, t) => {
      targets[b * 7 + t] = row[t + 1] ?? 17;
      dLogprobs[b * 7 + t] = attentionMask[b][t] * (random() - 0.3);
    }),
  );
  const batch = uploadTokenBatch(engine, { inputIds, attentionMask }, splitModelConfig.vocabSize, 'split-test');
  const out = lm.tokenLogprobs(batch, engine.tensorFrom('targets', [R], targets, 'u32'), { saveForBackward: true });
  const logprobs = Float32Array.from(await engine.read(out.logprobs));
  const entropy = Float32Array.from(await engine.read(out.entropy));
  // Full logits of two rows (sampling's path): the (2, V) output fits one binding, the weight does not.
  const logitsOut = engine.tensor('logits', [2, splitModelConfig.vocabSize]);
  const hidden = engine.tensorFrom(
    'hidden',
    [2, splitModelConfig.hiddenSize],
    Array.from({ length: 2 * splitModelConfig.hiddenSize }, (_, i) => Math.sin(i)),
  );
  lmHeadLogits(engine, {
    hidden,
    weight: params.get('model.embed_tokens.weight'),
    out: logitsOut,
    N: 2,
    C: splitModelConfig.hiddenSize,
    V: splitModelConfig.vocabSize,
  });
  const logits = await engine.read(logitsOut);
  const optimizer = new AdamWOptimizer(engine, params, {
    lr: 1e-2,
    betas: [0.9, 0.95],
    eps: 1e-8,
    weightDecay: 0.1,
    maxGradNorm: 0.5,
  });
  optimizer.zeroGrad();
  lm.backward(
    engine.tensorFrom('dLogprobs', [R], dLogprobs),
    engine.tensorFrom(
      'dEntropy',
      [R],
      dLogprobs.map((g) => 0.3 * g),
    ),
    optimizer.grads,
  );
  const grads = new Map<string, Float32Array>();
  for (const name of params.names()) grads.set(name, await engine.read(optimizer.grads.get(name)));
  // The step starts from the same gradients on both engines (the unsplit engine's), so it tests AdamW's split alone.
  for (const [name, grad] of stepGrads ?? grads) engine.upload(optimizer.grads.get(name), grad);
  await optimizer.step();
  const updated = new Map<string, Float32Array>();
  for (const name of params.names()) updated.set(name, await engine.read(params.get(name)));
  return { logprobs, entropy, logits, grads, updated, params, optimizer };
}
