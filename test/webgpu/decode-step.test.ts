// A decode step's dispatch count and its fusions: on a CPU device each layer is one dispatch
// (kernels/decode/decode-layer); without it the rmsnorms fold into the projections after them, swiglu into down_proj
// and RoPE into the decode attention (kernels/matmul/matmul-register.wgsl prologues,
// kernels/decode/decode-attention.wgsl); the logits equal those of the unfused kernels; the transposed copies of the
// weights (CPU devices) give the logits of the weights as stored, follow the weights when they are written, and are one
// set shared with the training trunk of the same arena.
import { describe, it, expect, vi } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import type { Engine, KernelSpec } from '../../engine/index.ts';
import { parseHfConfig, type DecoderConfig } from '../../models/hf-config.ts';
import { initialParameters } from '../../models/init.ts';
import { createParameterArena, frozenParameterCopy, uploadArenaTensors } from '../../models/parameter-store.ts';
import { IncrementalDecoder } from '../../models/incremental-decoder.ts';
import { DecoderTrunk } from '../../models/decoder.ts';
import { uploadTokenBatch } from '../../models/token-batch.ts';
import { expectClose } from '../support/arrays.ts';
import { decodeLayerVariants } from '../../kernels/decode/decode-layer.ts';
import { matmulPrologueVariants } from '../../kernels/matmul/matmul.ts';

function config(architecture: string): DecoderConfig {
  return parseHfConfig({
    architectures: [architecture],
    vocab_size: 61,
    hidden_size: 32,
    intermediate_size: 48,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    head_dim: 8,
    rms_norm_eps: 1e-6,
    rope_theta: 10000,
    tie_word_embeddings: false,
  });
}

/** Logits after a 3-token prefill of 2 rows and two decode steps, and the second step's dispatches (the first
 *  also makes the transposed weights), with the given kernel variants. */
async function decodeStep(
  engine: Engine,
  c: DecoderConfig,
  variants: Record<string, string>,
  seed = 3,
): Promise<{ dispatches: number; logits: ArrayLike<number> }> {
  const params = createParameterArena(engine, c, `decode-step-${c.architecture}-${Object.values(variants).join('-')}`);
  uploadArenaTensors(engine, params, initialParameters(c, seed, 0.35));
  Object.assign(engine.knobs.kernelVariants, variants);
  const decoder = new IncrementalDecoder(engine, c, params, { maxRows: 2, capacity: 8 });
  try {
    decoder.reset(2);
    const T = 3;
    decoder.extend({
      ids: engine.tensorFrom('ids', [2 * T], [5, 9, 12, 7, 3, 40], 'u32'),
      positions: engine.tensorFrom('positions', [2 * T], [0, 1, 2, 0, 1, 2], 'i32'),
      T,
      mask: null,
    });
    decoder.extend({
      ids: engine.tensorFrom('next', [2], [17, 33], 'u32'),
      positions: engine.tensorFrom('nextPositions', [2], [3, 3], 'i32'),
      T: 1,
      mask: null,
    });
    const before = engine.dispatchCount;
    const logits = decoder.extend({
      ids: engine.tensorFrom('next2', [2], [8, 21], 'u32'),
      positions: engine.tensorFrom('nextPositions2', [2], [4, 4], 'i32'),
      T: 1,
      mask: null,
    });
    const dispatches = engine.dispatchCount - before;
    return { dispatches, logits: await engine.read(logits) };
  } finally {
    for (const op of Object.keys(variants)) delete engine.knobs.kernelVariants[op];
    decoder.destroy();
  }
}

describe('decode step', () => {
  for (const architecture of ['LlamaForCausalLM', 'Qwen3ForCausalLM']) {
    it(
      `${architecture}: one dispatch per layer (CPU class), prologues fused, and separate kernels give the same ` +
        `logits`,
      async () => {
        const engine = await gpuEngine();
        const c = config(architecture);
        const layer = await decodeStep(engine, c, {});
        const fused = await decodeStep(engine, c, { 'decode-layer': 'separate', 'matmul-prologue': 'fused' });
        const separate = await decodeStep(engine, c, { 'decode-layer': 'separate', 'matmul-prologue': 'separate' });
        expectClose(layer.logits, separate.logits, 1e-5, 1e-5, 'logits of the fused layers');
        expectClose(fused.logits, separate.logits, 1e-5, 1e-5, 'logits with prologues');
        // embedding; per layer qkv, [q/k norm], attention, o_proj, gate_up, down; final norm and LM head (one
        // dispatch against the CPU class's transposed head).
        const perLayer = 5 + (c.qkNorm ? 1 : 0);
        const head = engine.caps.deviceClass === 'cpu' ? 1 : 2;
        expect(fused.dispatches).toBe(1 + c.numLayers * perLayer + head);
        // Separate: the rmsnorms and swiglu come back (RoPE stays fused: it is not a CPU-only choice).
        expect(separate.dispatches).toBe(fused.dispatches + 3 * c.numLayers + 2 - head);
        // The device class's own choice: one dispatch per layer where kernels/decode/decode-layer runs (the CPU class
        // with 8-lane subgroups), else the prologues fused (CPU class) or separate kernels (GPU class).
        const oneDispatchPerLayer = decodeLayerVariants[0].supported(engine.caps);
        const prologuesFused = matmulPrologueVariants[0].supported(engine.caps);
        expect(layer.dispatches).toBe(
          oneDispatchPerLayer ? 1 + c.numLayers + head : prologuesFused ? fused.dispatches : separate.dispatches,
        );
      },
    );
  }

  it('multiplies by transposed weights or the weights as stored to the same logits, fused or not', async () => {
    const engine = await gpuEngine();
    const c = config('LlamaForCausalLM');
    const stored = await decodeStep(engine, c, { 'decode-weights': 'as-stored', 'matmul-prologue': 'separate' });
    for (const prologue of ['fused', 'separate']) {
      const transposed = await decodeStep(engine, c, { 'decode-weights': 'transposed', 'matmul-prologue': prologue });
      expectClose(transposed.logits, stored.logits, 1e-5, 1e-5, `transposed, ${prologue}`);
    }
  });

  it(
    'transposes the weights again once they are written (an optimizer update), so decode steps follow ' + 'them',
    async () => {
      const engine = await gpuEngine();
      const c = config('LlamaForCausalLM');
      const params = createParameterArena(engine, c, 'decode-step-refresh');
      uploadArenaTensors(engine, params, initialParameters(c, 3, 0.35));
      engine.knobs.kernelVariants['decode-weights'] = 'transposed';
      const decoder = new IncrementalDecoder(engine, c, params, { maxRows: 1, capacity: 4 });
      const step = async () => {
        decoder.reset(1);
        return Array.from(
          await engine.read(
            decoder.extend({
              ids: engine.tensorFrom('id', [1], [7], 'u32'),
              positions: engine.tensorFrom('position', [1], [0], 'i32'),
              T: 1,
              mask: null,
            }),
          ),
        );
      };
      try {
        const before = await step();
        uploadArenaTensors(engine, params, initialParameters(c, 4, 0.35));
        const after = await step();
        // The reference multiplies by the weights as stored: another decoder of this arena would share the copies.
        engine.knobs.kernelVariants['decode-weights'] = 'as-stored';
        const expected = await step();
        decoder.destroy();
        expect(after).not.toEqual(before);
        expectClose(after, expected, 1e-5, 1e-5, 'logits after the update');
      } finally {
        delete engine.knobs.kernelVariants['decode-weights'];
      }
    },
  );

  it(
    'shares one set of transposed copies with the training trunk of the same arena, remade once per weight ' + 'write',
    async () => {
      const engine = await gpuEngine();
      const c = config('LlamaForCausalLM');
      const params = createParameterArena(engine, c, 'decode-step-shared');
      uploadArenaTensors(engine, params, initialParameters(c, 5, 0.35));
      Object.assign(engine.knobs.kernelVariants, {
        'decode-weights': 'transposed',
        'transposed-weights': 'transposed',
      });
      const trunk = new DecoderTrunk(engine, c, params);
      const decoder = new IncrementalDecoder(engine, c, params, { maxRows: 1, capacity: 4 });
      const transposes = (work: () => unknown) => {
        const dispatch = vi.spyOn(engine, 'dispatch');
        try {
          work();
          return dispatch.mock.calls.filter(([spec]) => (spec as KernelSpec).name.startsWith('transpose/')).length;
        } finally {
          dispatch.mockRestore();
        }
      };
      const batch = uploadTokenBatch(
        engine,
        { inputIds: [[3, 8, 1]], attentionMask: [[1, 1, 1]] },
        c.vocabSize,
        'shared-batch',
      );
      const decode = () => {
        decoder.reset(1);
        decoder.extend({
          ids: engine.tensorFrom('id', [1], [7], 'u32'),
          positions: engine.tensorFrom('position', [1], [0], 'i32'),
          T: 1,
          mask: null,
        });
      };
      try {
        const layerWeights = 4 * c.numLayers;
        // The trunk makes the layers' copies; the decoder then adds only the LM head's (61 × 32 is under 4M).
        expect(transposes(() => trunk.forward(batch, { saveForBackward: true }))).toBe(layerWeights);
        expect(transposes(decode)).toBe(1);
        expect(transposes(() => trunk.forward(batch, { saveForBackward: true }))).toBe(0);
        // A write into the arena: whoever runs next remakes them, once, for both.
        uploadArenaTensors(engine, params, initialParameters(c, 6, 0.35));
        expect(transposes(decode)).toBe(layerWeights + 1);
        expect(transposes(() => trunk.forward(batch, { saveForBackward: true }))).toBe(0);
        // The decoder's release leaves the trunk's set in place.
        decoder.destroy();
        expect(transposes(() => trunk.forward(batch, { saveForBackward: true }))).toBe(0);
      } finally {
        delete engine.knobs.kernelVariants['decode-weights'];
        delete engine.knobs.kernelVariants['transposed-weights'];
      }
    },
  );
});

describe('decode step in half precision (actor_rollout_ref.rollout.dtype)', () => {
  // A prefill of 3 tokens (through kernels/decode/kv-cache-unpack), two decode steps (decode-attention on the half
  // cache) and a 2-token append after them (unpack again, now with earlier slots), with the weights' bf16 copy
  // (ppo/generation/rollout-weights.ts's, made by frozenParameterCopy) and a bf16 cache, against float32.
  // Bounds: each weight and cached value is off by at most u = 2⁻⁸ relative; through two layers and the LM head the
  // logits move by a few u of their size, so max |Δ log p| < 0.02·max |log p| (≈ 5u; measured 0.0145 on Llama's
  // third call, 0.0056 on Qwen3's); the distributions' KL, what rollout_corr/kl estimates, is to second order
  // ½·Var_p(Δ log p) ≤ ½·max |Δ log p|² (measured at most 1.4e-3; bound with 10% for the third order).
  it('bfloat16 weights and KV cache: log-probs within 0.02·max |log p| of float32, KL ≤ ½·max Δ²', async () => {
    const engine = await gpuEngine();
    for (const architecture of ['LlamaForCausalLM', 'Qwen3ForCausalLM']) {
      const c = config(architecture);
      const params = createParameterArena(engine, c, `decode-step-half-${architecture}`);
      uploadArenaTensors(engine, params, initialParameters(c, 7, 0.35));
      const half = frozenParameterCopy(engine, c, params, 'rollout', 'bf16');
      const calls = async (weights: typeof params, cacheDtype: 'f32' | 'bf16') => {
        const decoder = new IncrementalDecoder(engine, c, weights, { maxRows: 2, capacity: 10, cacheDtype });
        decoder.reset(2);
        const out: Float32Array[] = [];
        const feed = async (ids: number[], positions: number[], T: number) => {
          const logits = decoder.extend({
            ids: engine.tensorFrom('ids', [ids.length], ids, 'u32'),
            positions: engine.tensorFrom('positions', [ids.length], positions, 'i32'),
            T,
            mask: null,
          });
          out.push(logSoftmaxRows(Float32Array.from(await engine.read(logits)), c.vocabSize));
        };
        await feed([5, 9, 12, 7, 3, 40], [0, 1, 2, 0, 1, 2], 3);
        await feed([17, 33], [3, 3], 1);
        await feed([8, 21], [4, 4], 1);
        await feed([2, 30, 44, 6], [5, 6, 5, 6], 2);
        decoder.destroy();
        return out;
      };
      const full = await calls(params, 'f32');
      const rounded = await calls(half, 'bf16');
      full.forEach((f, call) => {
        let gap = 0;
        let range = 0;
        for (let i = 0; i < f.length; i++) {
          gap = Math.max(gap, Math.abs(f[i] - rounded[call][i]));
          range = Math.max(range, Math.abs(f[i]));
        }
        expect(gap, `${architecture}, call ${call}: max |Δ log p| over ${range} nats`).toBeLessThan(0.02 * range);
        expect(gap, `${architecture}, call ${call}: bf16 changes something`).toBeGreaterThan(0);
        for (let r = 0; r < 2; r++) {
          let kl = 0;
          for (let i = r * c.vocabSize; i < (r + 1) * c.vocabSize; i++)
            kl += Math.exp(f[i]) * (f[i] - rounded[call][i]);
          expect(kl, `${architecture}, call ${call}, row ${r}: KL(float32 ‖ bfloat16)`).toBeLessThan(0.55 * gap * gap);
        }
      });
    }
  });
});

/** Each row of (rows, V) logits as log-probabilities (float64 log-sum-exp). */
function logSoftmaxRows(logits: Float32Array, V: number): Float32Array {
  const out = new Float32Array(logits.length);
  for (let r = 0; r < logits.length / V; r++) {
    const row = logits.subarray(r * V, (r + 1) * V);
    const max = Math.max(...row);
    const lse = max + Math.log(row.reduce((s, x) => s + Math.exp(x - max), 0));
    for (let i = 0; i < V; i++) out[r * V + i] = row[i] - lse;
  }
  return out;
}
