// LoRA adapters (models/lora.ts, models/lora-adapters.ts) on the decoder: the adapted model's logits equal those
// of the base model with W + scaling·B·A merged in (training forward and the rollout's incremental decoder, fused
// decode prologues included); the adapters' gradients match central differences of the float64 reference decoder
// with merged weights; the off-block entries of the fused Bᵀ get no gradient after clearing; PEFT's tensors round-trip.
import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { expectClose, seededRandom } from '../support/arrays.ts';
import { numericGradient } from '../support/numeric-gradient.ts';
import { parseHfConfig, type DecoderConfig } from '../../models/hf-config.ts';
import { initialParameters } from '../../models/init.ts';
import {
  createParameterArena,
  uploadArenaTensors,
  uploadHfTensors,
  splitHfTensors,
  type NamedTensor,
} from '../../models/parameter-store.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { DecoderTrunk } from '../../models/decoder.ts';
import { IncrementalDecoder } from '../../models/incremental-decoder.ts';
import { LoraAdapters } from '../../models/lora-adapters.ts';
import {
  loraProjections,
  loraValuesFromPeft,
  mergeLora,
  offBlockRanges,
  peftTensors,
  resolveTargetModules,
  peftNames,
  loraScaling,
  type LoraSettings,
} from '../../models/lora.ts';
import { uploadTokenBatch, positionsFromMask } from '../../models/token-batch.ts';
import { decoderForwardRef } from '../../models/ref/decoder.ts';
import { Arena, type Engine } from '../../engine/index.ts';

function tinyConfig(architecture: string, extra: Record<string, unknown> = {}): DecoderConfig {
  return parseHfConfig({
    architectures: [architecture],
    vocab_size: 23,
    hidden_size: 16,
    intermediate_size: 20,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    head_dim: 8,
    rms_norm_eps: 1e-6,
    rope_theta: 10000,
    ...extra,
  });
}

const QWEN3 = tinyConfig('Qwen3ForCausalLM', { tie_word_embeddings: true });
const QWEN2 = tinyConfig('Qwen2ForCausalLM', { tie_word_embeddings: false });

function settings(targets: string[], rank = 2): LoraSettings {
  return {
    rank,
    alpha: 5,
    targetModules: resolveTargetModules(targets, null, 'actor_rollout_ref.model.target_modules'),
    useRslora: false,
  };
}

/** Random PEFT tensors (B non-zero, as after training) for these settings. */
function randomPeft(c: DecoderConfig, s: LoraSettings, seed: number): Map<string, NamedTensor> {
  const random = seededRandom(seed);
  const out = new Map<string, NamedTensor>();
  for (const p of loraProjections(c, s)) {
    for (const m of p.modules) {
      const names = peftNames(m.hfModule);
      out.set(names.a, {
        shape: [s.rank, p.inFeatures],
        data: Float32Array.from({ length: s.rank * p.inFeatures }, () => 0.6 * (random() - 0.5)),
      });
      out.set(names.b, {
        shape: [m.width, s.rank],
        data: Float32Array.from({ length: m.width * s.rank }, () => 0.6 * (random() - 0.5)),
      });
    }
  }
  return out;
}

const inputIds = [
  [3, 7, 1, 22, 9, 4],
  [0, 0, 5, 11, 2, 17],
];
const attentionMask = [
  [1, 1, 1, 1, 1, 1],
  [0, 0, 1, 1, 1, 1],
];

async function logitsOf(
  engine: Engine,
  c: DecoderConfig,
  params: Arena,
  lora: LoraAdapters | null,
): Promise<Float32Array> {
  const lm = new CausalLm(engine, c, params);
  lm.trunk.lora = lora;
  const batch = uploadTokenBatch(engine, { inputIds, attentionMask }, c.vocabSize);
  const out = engine.tensor('logits', [inputIds.length * inputIds[0].length, c.vocabSize]);
  return engine.read(lm.logits(batch, out));
}

describe('LoRA adapters', () => {
  for (const [label, c, targets] of [
    ['qwen3, all-linear', QWEN3, ['all-linear']],
    ['qwen2 (q/k/v bias), [q_proj, v_proj, down_proj]', QWEN2, ['q_proj', 'v_proj', 'down_proj']],
  ] as const) {
    it(
      `${label}: logits equal the merged model's (W + scaling·B·A), in training forward and incremental ` + `decoding`,
      async () => {
        const engine = await gpuEngine();
        const s = settings([...targets]);
        const baseValues = initialParameters(c, 4, 0.3);
        const base = createParameterArena(engine, c, `lora-base-${label}`);
        uploadArenaTensors(engine, base, baseValues);
        const peft = randomPeft(c, s, 9);
        const adapters = new LoraAdapters(
          engine,
          c,
          s,
          loraValuesFromPeft(c, s, (n) => peft.get(n), 'test'),
          `lora-${label}`,
        );
        const merged = createParameterArena(engine, c, `lora-merged-${label}`);
        const mergedTensors = mergeLora(c, s, splitHfTensors(c, baseValues), peft);
        uploadHfTensors(engine, merged, c, (n) => mergedTensors.get(n), 'merged');

        const adapted = await logitsOf(engine, c, base, adapters);
        const reference = await logitsOf(engine, c, merged, null);
        const plain = await logitsOf(engine, c, base, null);
        expectClose(adapted, reference, 2e-5, 1e-4, 'adapted vs merged logits');
        expect(Math.max(...adapted.map((x, i) => Math.abs(x - plain[i])))).toBeGreaterThan(1e-2);

        // The rollout's decoder: a prefill then decode steps (fused prologues on lavapipe) against the same forward.
        const T = inputIds[0].length;
        for (const [model, lora] of [
          [base, adapters],
          [merged, null],
        ] as const) {
          const decoder = new IncrementalDecoder(engine, c, model, { maxRows: 2, capacity: T, lora });
          decoder.reset(2);
          const positions = attentionMask.map((m) => positionsFromMask(m));
          const prefill = 3;
          decoder.extend({
            ids: engine.tensorFrom(
              'ids',
              [2 * prefill],
              inputIds.flatMap((r) => r.slice(0, prefill)),
              'u32',
            ),
            positions: engine.tensorFrom(
              'pos',
              [2 * prefill],
              positions.flatMap((r) => r.slice(0, prefill)),
              'i32',
            ),
            T: prefill,
            mask: attentionMask.flatMap((r) => r.slice(0, prefill)),
          });
          for (let t = prefill; t < T; t++) {
            const logits = await engine.read(
              decoder.extend({
                ids: engine.tensorFrom(
                  'id',
                  [2],
                  inputIds.map((r) => r[t]),
                  'u32',
                ),
                positions: engine.tensorFrom(
                  'p',
                  [2],
                  positions.map((r) => r[t]),
                  'i32',
                ),
                T: 1,
                mask: null,
              }),
            );
            for (let b = 0; b < 2; b++) {
              const row = (b * T + t) * c.vocabSize;
              expectClose(
                logits.slice(b * c.vocabSize, (b + 1) * c.vocabSize),
                adapted.slice(row, row + c.vocabSize),
                5e-5,
                1e-4,
                `decode t=${t} row ${b}`,
              );
            }
          }
          decoder.destroy();
        }
      },
    );
  }

  for (const checkpointing of [false, true]) {
    it(
      `adapter gradients match central differences of the float64 reference with merged ` +
        `weights${checkpointing ? ' (gradient checkpointing)' : ''}`,
      async () => {
        const engine = await gpuEngine();
        const c = QWEN3;
        const s = settings(['all-linear']);
        const scaling = loraScaling(s);
        const baseValues = initialParameters(c, 6, 0.3);
        const base = createParameterArena(engine, c, 'lora-grad-base');
        uploadArenaTensors(engine, base, baseValues);
        const peft = randomPeft(c, s, 11);
        const loraValues = loraValuesFromPeft(c, s, (n) => peft.get(n), 'test');
        const adapters = new LoraAdapters(engine, c, s, loraValues, 'lora-grad');
        const trunk = new DecoderTrunk(engine, c, base);
        trunk.lora = adapters;
        trunk.gradientCheckpointing = checkpointing;
        const B = inputIds.length;
        const T = inputIds[0].length;
        const C = c.hiddenSize;
        const batch = uploadTokenBatch(engine, { inputIds, attentionMask }, c.vocabSize);
        trunk.forward(batch, { saveForBackward: true });
        const real = attentionMask.flat();
        const random = seededRandom(3);
        const G = Float64Array.from({ length: B * T * C }, (_, i) => (real[Math.floor(i / C)] ? random() - 0.5 : 0));
        const grads = new Arena(engine, 'lora-grad.grads', adapters.params.layout);
        trunk.backward(engine.tensorFrom('dHidden', [B * T, C], G), grads);
        adapters.clearOffBlockGradients(grads);

        // f(A, Bᵀ) = Σ G ∘ hidden of the reference decoder whose fused weights are W + scaling·(Bᵀ)ᵀ·A.
        const adapter64 = new Map([...loraValues].map(([k, v]) => [k, Float64Array.from(v)]));
        const refBatch = {
          B,
          T,
          ids: inputIds.flat(),
          keyMask: real,
          positions: attentionMask.flatMap((m) => positionsFromMask(m)),
        };
        const projections = loraProjections(c, s);
        const loss = () => {
          const params = new Map<string, ArrayLike<number>>(baseValues);
          for (const p of projections) {
            const weightName = p.a.replace('.lora_A', '.weight');
            const w = Float64Array.from(baseValues.get(weightName)!);
            const a = adapter64.get(p.a)!;
            const bT = adapter64.get(p.bT)!;
            const n = a.length / p.inFeatures;
            for (let o = 0; o < p.outFeatures; o++) {
              for (let k = 0; k < p.inFeatures; k++) {
                let d = 0;
                for (let j = 0; j < n; j++) d += bT[j * p.outFeatures + o] * a[j * p.inFeatures + k];
                w[o * p.inFeatures + k] += scaling * d;
              }
            }
            params.set(weightName, w);
          }
          const hidden = decoderForwardRef(c, params, refBatch).hidden;
          let sum = 0;
          for (let i = 0; i < hidden.length; i++) sum += G[i] * hidden[i];
          return sum;
        };
        // Every entry of the first layer's q/k/v and the last layer's down adapter; the rest is the same code.
        // Off-block entries of a fused Bᵀ are held at zero: their numeric gradient is not (they would couple
        // modules), the engine's is after clearing.
        for (const p of [projections[0], projections[projections.length - 1]]) {
          for (const name of [p.a, p.bT]) {
            const numeric = numericGradient(adapter64.get(name)!, loss, 1e-5);
            if (name === p.bT) {
              const offBlock = offBlockRanges(p, s).flatMap(([start, end]) => Array.from(numeric.slice(start, end)));
              if (p.modules.length > 1) expect(offBlock.some((v) => Math.abs(v) > 1e-3)).toBe(true);
              for (const [start, end] of offBlockRanges(p, s)) numeric.fill(0, start, end);
            }
            const got = await engine.read(grads.get(name));
            const scale = Math.max(...Array.from(numeric, Math.abs));
            expectClose(got, numeric, 2e-4 * scale, 1e-3, `gradient of ${name}`);
          }
        }
      },
    );
  }

  it('PEFT tensors round-trip through the stacked layout; a bad target module name is one line naming the key', () => {
    const s = settings(['q_proj', 'k_proj', 'gate_proj'], 3);
    const peft = randomPeft(QWEN2, s, 2);
    const back = peftTensors(
      QWEN2,
      s,
      loraValuesFromPeft(QWEN2, s, (n) => peft.get(n), 'test'),
    );
    expect([...back.keys()].sort()).toEqual([...peft.keys()].sort());
    for (const [name, t] of peft) expect(back.get(name)).toEqual(t);
    expect([...back.keys()]).toContain('base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight');
    expect(() => resolveTargetModules(['q_proj', 'qkv'], null, 'actor_rollout_ref.model.target_modules')).toThrow(
      /^actor_rollout_ref\.model\.target_modules: unknown module 'qkv'; expected 'all-linear' or names from q_proj, k_proj/,
    );
    expect(resolveTargetModules(['all-linear'], ['down_proj'], 'k')).toEqual([
      'q_proj',
      'k_proj',
      'v_proj',
      'o_proj',
      'gate_proj',
      'up_proj',
    ]);
  });
});
