// The whole GPU decoder (forward hidden state and every parameter gradient) against the float64 CPU reference model
// composed from kernels/<family>/<op>.ref.ts, for each architecture's distinctive parts: Qwen3 (q/k norm, tied head),
// Qwen2 (q/k/v bias), Llama with attention_bias (o_proj bias), on a left-padded batch; each with the layer weights as
// stored (nt projections) and as transposed copies (nn, the training forward on CPU devices).
import { describe, it } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { expectClose, seededRandom } from '../support/arrays.ts';
import { parseHfConfig, type DecoderConfig } from '../../models/hf-config.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { parameterEntries } from '../../models/parameter-layout.ts';
import { DecoderTrunk } from '../../models/decoder.ts';
import { uploadTokenBatch, positionsFromMask } from '../../models/token-batch.ts';
import { decoderForwardRef, decoderBackwardRef } from '../../models/ref/decoder.ts';
import { Arena, elementCount } from '../../engine/index.ts';
import { transposedWeightVariants } from '../../kernels/util/transpose.ts';

function tinyConfig(architecture: string, extra: Record<string, unknown> = {}): DecoderConfig {
  return parseHfConfig({
    architectures: [architecture],
    vocab_size: 23,
    hidden_size: 16,
    intermediate_size: 20,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    head_dim: 6,
    rms_norm_eps: 1e-6,
    rope_theta: 10000,
    ...extra,
  });
}

const CONFIGS: [string, DecoderConfig][] = [
  ['qwen3', tinyConfig('Qwen3ForCausalLM', { tie_word_embeddings: true })],
  ['qwen2', tinyConfig('Qwen2ForCausalLM')],
  ['llama+bias', tinyConfig('LlamaForCausalLM', { attention_bias: true, head_dim: 8 })],
];

describe('GPU decoder matches the CPU reference decoder', () => {
  for (const [label, config] of CONFIGS)
    for (const weights of transposedWeightVariants) {
      it(`${label}, weights ${weights.name}: final hidden state and all parameter gradients`, async () => {
        const engine = await gpuEngine();
        engine.knobs.kernelVariants['transposed-weights'] = weights.name;
        const random = seededRandom(7);
        const values = new Map<string, Float32Array>();
        for (const entry of parameterEntries(config)) {
          const data = new Float32Array(elementCount(entry.shape));
          const isNorm = entry.name.includes('norm');
          for (let i = 0; i < data.length; i++) data[i] = isNorm ? 1 + 0.3 * (random() - 0.5) : 0.4 * (random() - 0.5);
          values.set(entry.name, data);
        }
        const params = createParameterArena(engine, config, `params-${label}`);
        uploadArenaTensors(engine, params, values);

        const B = 2;
        const T = 5;
        const inputIds = [
          [3, 7, 1, 22, 9],
          [0, 0, 5, 11, 2],
        ];
        const attentionMask = [
          [1, 1, 1, 1, 1],
          [0, 0, 1, 1, 1],
        ];
        const batch = uploadTokenBatch(engine, { inputIds, attentionMask }, config.vocabSize);
        const trunk = new DecoderTrunk(engine, config, params);
        const hidden = await engine.read(trunk.forward(batch, { saveForBackward: true }));

        const refBatch = {
          B,
          T,
          ids: inputIds.flat(),
          keyMask: attentionMask.flat(),
          positions: attentionMask.flatMap((m) => positionsFromMask(m)),
        };
        const ref = decoderForwardRef(config, values, refBatch);
        const real = attentionMask.flat();
        const C = config.hiddenSize;
        const onReal = (a: ArrayLike<number>) => Array.from(a).filter((_, i) => real[Math.floor(i / C)] === 1);
        expectClose(onReal(hidden), onReal(ref.hidden), 1e-5, 1e-4, 'final hidden');

        // Loss = Σ hidden ∘ G on real rows only (pad rows carry no gradient, as in training).
        const G = new Float32Array(B * T * C);
        for (let i = 0; i < G.length; i++) G[i] = real[Math.floor(i / C)] ? random() - 0.5 : 0;
        const grads = new Arena(engine, `grads-${label}`, params.layout);
        trunk.backward(engine.tensorFrom('dHidden', [B * T, C], G), grads);
        const refGrads = decoderBackwardRef(config, values, refBatch, ref, G);
        for (const name of params.names()) {
          if (name === 'lm_head.weight') continue;
          const got = await engine.read(grads.get(name));
          const expected = refGrads.get(name)!;
          const scale = Math.max(1e-6, ...Array.from(expected, Math.abs));
          expectClose(got, expected, 1e-4 * scale, 1e-4, `${label} grad ${name}`);
        }
        delete engine.knobs.kernelVariants['transposed-weights'];
      });
    }
});
