// A prompt's log-probs scored on the device (ppo/generation/prompt-scoring.ts: the incremental decoder with every
// position's logits, chunk by chunk, and kernels/decode/prompt-logprobs) against the float64 reference decoder's
// log_softmax at each position: the next token's log-prob and rank and the top alternatives, with the prompt in
// one chunk, in chunks of 3 positions, and one position at a time (the decode-step path of the decoder); given tokens'
// log-probs at every position (SGLang's token_ids_logprob), and the whole vocabulary ranked (vLLM's prompt_logprobs
// -1), which the host ranks from every token's gathered log-prob.
import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { seededRandom } from '../support/arrays.ts';
import { parseHfConfig } from '../../models/hf-config.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { lmHeadWeightName, parameterEntries } from '../../models/parameter-layout.ts';
import { decoderForwardRef } from '../../models/ref/decoder.ts';
import { elementCount } from '../../engine/index.ts';
import { PromptScorer } from '../../ppo/generation/prompt-scoring.ts';
import { promptLogprobsRef } from '../../kernels/decode/prompt-logprobs.ref.ts';

describe('prompt scoring on the device', () => {
  it("matches the reference decoder's log_softmax at every prompt position, in any chunking", async () => {
    const engine = await gpuEngine();
    const config = parseHfConfig({
      architectures: ['Qwen3ForCausalLM'],
      vocab_size: 23,
      hidden_size: 16,
      intermediate_size: 20,
      num_hidden_layers: 2,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      head_dim: 6,
      rms_norm_eps: 1e-6,
      rope_theta: 10000,
      tie_word_embeddings: true,
    });
    const random = seededRandom(3);
    const values = new Map<string, Float32Array>();
    for (const entry of parameterEntries(config)) {
      const data = new Float32Array(elementCount(entry.shape));
      const isNorm = entry.name.includes('norm');
      for (let i = 0; i < data.length; i++) data[i] = isNorm ? 1 + 0.3 * (random() - 0.5) : 1.2 * (random() - 0.5);
      values.set(entry.name, data);
    }
    const params = createParameterArena(engine, config, 'params-scoring');
    uploadArenaTensors(engine, params, values);
    const prompt = [3, 7, 1, 22, 9, 9, 0, 14, 5];
    const T = prompt.length;
    const ref = decoderForwardRef(config, values, {
      B: 1,
      T,
      ids: prompt,
      keyMask: prompt.map(() => 1),
      positions: prompt.map((_, t) => t),
    });
    const V = config.vocabSize;
    const C = config.hiddenSize;
    const head = values.get(lmHeadWeightName(config))!;
    const logits = Array.from({ length: T * V }, (_, i) => {
      const [t, v] = [Math.floor(i / V), i % V];
      let dot = 0;
      for (let k = 0; k < C; k++) dot += ref.hidden[t * C + k] * head[v * C + k];
      return dot;
    });
    const K = 4;
    const want = promptLogprobsRef(logits.slice(0, (T - 1) * V), V, prompt.slice(1), K);
    expect(new Set(want.map((w) => w.rank)).size).toBeGreaterThan(2);
    for (const chunkPositions of [T, 3, 1]) {
      const scorer = new PromptScorer(engine, { config, params, lora: null }, 16, chunkPositions * V);
      const got = await scorer.score(prompt, K);
      scorer.destroy();
      want.forEach((w, p) => {
        const where = `chunks of ${chunkPositions}, position ${p + 1}`;
        expect(Math.abs(got.logprobs[p] - w.logprob), where).toBeLessThan(1e-4);
        expect(got.ranks[p], where).toBe(w.rank);
        expect(Array.from(got.top.ids.subarray(p * K, p * K + K)), where).toEqual(w.ids);
        w.logprobs.forEach((lp, k) => expect(Math.abs(got.top.logprobs[p * K + k] - lp), where).toBeLessThan(1e-4));
      });
    }
    const gather = [5, 0, 22, 5];
    const whole = promptLogprobsRef(logits.slice(0, (T - 1) * V), V, prompt.slice(1), V, gather);
    for (const chunkPositions of [T, 3]) {
      const scorer = new PromptScorer(engine, { config, params, lora: null }, 16, chunkPositions * V);
      const some = await scorer.score(prompt, K, { gather });
      const every = await scorer.score(prompt, V, { gather });
      scorer.destroy();
      whole.forEach((w, p) => {
        const where = `chunks of ${chunkPositions}, position ${p + 1}`;
        w.gathered.forEach((lp, j) => {
          expect(Math.abs(some.gathered[p * gather.length + j] - lp), where).toBeLessThan(1e-4);
          expect(Math.abs(every.gathered[p * gather.length + j] - lp), where).toBeLessThan(1e-4);
        });
        expect(Math.abs(every.logprobs[p] - w.logprob), where).toBeLessThan(1e-4);
        expect(every.ranks[p], where).toBe(w.rank);
        expect(Array.from(every.top.ids.subarray(p * V, (p + 1) * V)), where).toEqual(w.ids);
        w.logprobs.forEach((lp, k) => expect(Math.abs(every.top.logprobs[p * V + k] - lp), where).toBeLessThan(1e-4));
      });
    }
  });
});
