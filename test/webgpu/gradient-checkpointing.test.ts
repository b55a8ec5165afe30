// Activation recomputation (enable_gradient_checkpointing): a training forward that keeps only each layer's input,
// with the layer recomputed in backward, must give the gradients of the forward that keeps every activation —
// bit for bit, since the recomputation runs the same kernels on the same inputs — for less activation memory.
import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { seededRandom } from '../support/arrays.ts';
import { parseHfConfig } from '../../models/hf-config.ts';
import { initialParameters } from '../../models/init.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { uploadTokenBatch } from '../../models/token-batch.ts';
import { Arena } from '../../engine/index.ts';

// Qwen2-style biases (their gradients use the ones column) and 3 layers: the middle layer's input is neither
// the embedding's output nor the final norm's input.
const CONFIG = parseHfConfig({
  architectures: ['Qwen2ForCausalLM'],
  vocab_size: 29,
  hidden_size: 32,
  intermediate_size: 64,
  num_hidden_layers: 3,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  rms_norm_eps: 1e-6,
  tie_word_embeddings: false,
});
const B = 3;
const T = 16;

describe('gradient checkpointing', () => {
  it(
    'recomputing each layer in backward gives the stored-activation gradients bit for bit, for less ' + 'memory',
    async () => {
      const engine = await gpuEngine();
      const random = seededRandom(5);
      const inputIds = Array.from({ length: B }, () =>
        Array.from({ length: T }, () => Math.floor(random() * CONFIG.vocabSize)),
      );
      const attentionMask = inputIds.map((row, b) => row.map((_, t) => (t >= 2 * b ? 1 : 0)));
      const targets = engine.tensorFrom(
        'ckpt.targets',
        [B * T],
        inputIds.flatMap((row) => [...row.slice(1), 0]),
        'u32',
      );
      const dLogprobs = engine.tensorFrom(
        'ckpt.dLogprobs',
        [B * T],
        Array.from({ length: B * T }, () => random() - 0.5),
      );
      const dEntropy = engine.tensorFrom(
        'ckpt.dEntropy',
        [B * T],
        Array.from({ length: B * T }, () => 0.1 * (random() - 0.5)),
      );
      const params = createParameterArena(engine, CONFIG, 'ckpt');
      uploadArenaTensors(engine, params, initialParameters(CONFIG, 3, 0.3));

      const run = async (checkpointing: boolean) => {
        const lm = new CausalLm(engine, CONFIG, params);
        lm.trunk.gradientCheckpointing = checkpointing;
        const batch = uploadTokenBatch(engine, { inputIds, attentionMask }, CONFIG.vocabSize, `ckpt-${checkpointing}`);
        const out = lm.tokenLogprobs(batch, targets, { saveForBackward: true });
        const logprobs = await engine.read(out.logprobs);
        const grads = new Arena(engine, `ckpt-${checkpointing}.grads`, params.layout);
        lm.backward(dLogprobs, dEntropy, grads);
        return {
          logprobs,
          grads: await Promise.all(grads.segments.map((s) => engine.read(s))),
          bytes: lm.trunk.activationBytes(true),
        };
      };
      const stored = await run(false);
      const recomputed = await run(true);
      expect(recomputed.logprobs).toEqual(stored.logprobs);
      expect(stored.grads.some((g) => g.some((x) => x !== 0))).toBe(true);
      recomputed.grads.forEach((g, s) => expect(g, `gradient segment ${s}`).toEqual(stored.grads[s]));
      // Per layer only its input (R, C) stays; one layer's activations are shared.
      expect(recomputed.bytes).toBeLessThan(0.6 * stored.bytes);
    },
  );
});
