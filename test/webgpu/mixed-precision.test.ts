// Mixed-precision training (fsdp_config.dtype): the trunk's forward and backward multiply by a bf16/f16 copy of its
// float32 master weights, and the residual stream between layers is rounded to that dtype (kept so under gradient
// checkpointing). Outside truth: the float64 reference decoder run on the master weights with every matrix rounded to
// the compute dtype (what the copy holds) and its residual stream rounded the same way — the kernels unpack the halves
// exactly and do float32 arithmetic, so the float32 kernels' bound holds (hidden 1e-5 + 1e-4·|ref|, gradients
// 1e-4·max|ref| + 1e-4·|ref|), while the reference without the rounding is further off than that bound. Rounding
// float32 and float64 values of one residual element agrees unless it lies within their difference of a rounding
// midpoint: the weights are drawn from the first seed whose reference residual has no element within
// AMBIGUOUS(x) = 2e-7 + 2e-6·|x| of one (a float32 result is a few float32 ulps, ~5e-7·|x|, off), so the rounding is
// the reference's.
// Gradients land in the float32 arena, AdamW updates the float32 master, and the next forward's copy is the updated
// master rounded again.
import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { expectClose, seededRandom } from '../support/arrays.ts';
import { parseHfConfig, type DecoderConfig } from '../../models/hf-config.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { layerPrefix, parameterEntries } from '../../models/parameter-layout.ts';
import { DecoderTrunk } from '../../models/decoder.ts';
import { uploadTokenBatch, positionsFromMask } from '../../models/token-batch.ts';
import { decoderForwardRef, decoderBackwardRef } from '../../models/ref/decoder.ts';
import { elementCount, roundToHalf, type HalfDType } from '../../engine/index.ts';
import { AdamWOptimizer } from '../../ppo/training/adamw-optimizer.ts';

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

const qwen3 = tinyConfig('Qwen3ForCausalLM', { tie_word_embeddings: true });
/** [label, config, compute dtype, gradient checkpointing (layer inputs kept in the compute dtype)] */
const CASES: [string, DecoderConfig, HalfDType, boolean][] = [
  ['qwen3', qwen3, 'bf16', false],
  ['qwen3', qwen3, 'bf16', true],
  ['llama+bias', tinyConfig('LlamaForCausalLM', { attention_bias: true }), 'bf16', true],
  ['qwen3', qwen3, 'f16', true],
];

const inputIds = [
  [3, 7, 1, 22, 9],
  [0, 0, 5, 11, 2],
];
const attentionMask = [
  [1, 1, 1, 1, 1],
  [0, 0, 1, 1, 1],
];
const refBatch = {
  B: 2,
  T: 5,
  ids: inputIds.flat(),
  keyMask: attentionMask.flat(),
  positions: attentionMask.flatMap((m) => positionsFromMask(m)),
};

const AMBIGUOUS = (x: number) => 2e-7 + 2e-6 * Math.abs(x);

/** Random parameters (norms near 1) from `seed`. */
function drawValues(config: DecoderConfig, seed: number): Map<string, Float32Array> {
  const random = seededRandom(seed);
  const values = new Map<string, Float32Array>();
  for (const entry of parameterEntries(config)) {
    const data = new Float32Array(elementCount(entry.shape));
    const isNorm = entry.name.includes('norm');
    for (let i = 0; i < data.length; i++) data[i] = isNorm ? 1 + 0.3 * (random() - 0.5) : 0.4 * (random() - 0.5);
    values.set(entry.name, data);
  }
  return values;
}

/** The residual rounding of the reference in `dtype`, counting elements within AMBIGUOUS of a rounding midpoint. */
function roundingResidual(dtype: HalfDType) {
  const counter = { ambiguous: 0 };
  const residual = (x: Float64Array) => {
    for (const v of x)
      if (roundToHalf(dtype, [v - AMBIGUOUS(v)])[0] !== roundToHalf(dtype, [v + AMBIGUOUS(v)])[0]) counter.ambiguous++;
    return Float64Array.from(roundToHalf(dtype, x));
  };
  return { residual, counter };
}

/** The largest |a − b| over elements, relative to the tolerance atol + rtol·|b| (> 1: outside it). */
function worstRatio(a: ArrayLike<number>, b: ArrayLike<number>, atol: number, rtol: number): number {
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]) / (atol + rtol * Math.abs(b[i])));
  return worst;
}

describe('mixed precision: half-precision compute over float32 master weights', () => {
  for (const [label, config, dtype, checkpointing] of CASES)
    it(`${label}, ${dtype}${checkpointing ? ', checkpointed' : ''}: hidden and gradients as the float64 model on ${dtype}-rounded weights`, async () => {
      const engine = await gpuEngine();
      // What the compute copy holds: matrices rounded (models/parameter-layout.ts), norms and biases float32.
      const roundMatrices = (values: Map<string, Float32Array>) =>
        new Map(
          [...values].map(([name, v]) => {
            const matrix = parameterEntries(config).find((e) => e.name === name)!.shape.length === 2;
            return [name, matrix ? roundToHalf(dtype, v) : v];
          }),
        );
      let seed = 1;
      let found: { values: Map<string, Float32Array>; rounded: Map<string, Float32Array> } | null = null;
      for (; seed <= 400 && !found; seed++) {
        const values = drawValues(config, seed);
        const rounded = roundMatrices(values);
        const { residual, counter } = roundingResidual(dtype);
        decoderForwardRef(config, rounded, refBatch, residual);
        if (counter.ambiguous === 0) found = { values, rounded };
      }
      expect(found, 'a seed with no ambiguous residual rounding').not.toBeNull();
      const { values, rounded } = found!;
      const random = seededRandom(1000 + seed);
      const params = createParameterArena(engine, config, `mp-${label}-${dtype}`);
      uploadArenaTensors(engine, params, values);
      const trunk = new DecoderTrunk(engine, config, params);
      trunk.setComputeDtype(dtype);
      trunk.gradientCheckpointing = checkpointing;
      const batch = uploadTokenBatch(engine, { inputIds, attentionMask }, config.vocabSize);
      const hidden = await engine.read(trunk.forward(batch, { saveForBackward: true }));
      // Against float32 compute: checkpointed, every layer's input kept in the compute dtype instead of float32, one
      // float32 input shared by all and one float32 output before rounding; either mode, one (R, C) rounding scratch.
      const f32Trunk = new DecoderTrunk(engine, config, params);
      f32Trunk.gradientCheckpointing = checkpointing;
      f32Trunk.forward(batch, { saveForBackward: true });
      const RC = refBatch.B * refBatch.T * config.hiddenSize;
      const L = config.numLayers;
      expect(trunk.activationBytes(true) - f32Trunk.activationBytes(true)).toBe(
        checkpointing ? RC * (2 * L + 4 + 2 - 4 * (L - 1)) : 2 * RC,
      );

      const C = config.hiddenSize;
      const real = attentionMask.flat();
      const onReal = (a: ArrayLike<number>) => Array.from(a).filter((_, i) => real[Math.floor(i / C)] === 1);
      const ref = decoderForwardRef(config, rounded, refBatch, roundingResidual(dtype).residual);
      expectClose(onReal(hidden), onReal(ref.hidden), 1e-5, 1e-4, 'final hidden vs rounded-weight reference');
      const unrounded = decoderForwardRef(config, values, refBatch);
      expect(
        worstRatio(onReal(hidden), onReal(decoderForwardRef(config, rounded, refBatch).hidden), 1e-5, 1e-4),
      ).toBeGreaterThan(3);
      expect(worstRatio(onReal(hidden), onReal(unrounded.hidden), 1e-5, 1e-4)).toBeGreaterThan(3);

      const G = new Float32Array(refBatch.B * refBatch.T * C);
      for (let i = 0; i < G.length; i++) G[i] = real[Math.floor(i / C)] ? random() - 0.5 : 0;
      const optimizer = new AdamWOptimizer(engine, params, {
        lr: 1e-2,
        betas: [0.9, 0.999],
        eps: 1e-8,
        weightDecay: 0.01,
        maxGradNorm: 0,
      });
      trunk.backward(engine.tensorFrom('dHidden', [refBatch.B * refBatch.T, C], G), optimizer.grads);
      const refGrads = decoderBackwardRef(config, rounded, refBatch, ref, G);
      expect(optimizer.grads.dtypeOf(`${layerPrefix(0)}.mlp.down_proj.weight`)).toBe('f32');
      // The trunk's tensors (an untied lm_head is the LM head's: tests of CausalLm).
      for (const name of params.names().filter((n) => n !== 'lm_head.weight')) {
        const got = await engine.read(optimizer.grads.get(name));
        const expected = refGrads.get(name)!;
        const scale = Math.max(1e-6, ...Array.from(expected, Math.abs));
        expectClose(got, expected, 1e-4 * scale, 1e-4, `${label} ${dtype} grad ${name}`);
      }

      // AdamW moves the float32 master by less than a half-precision step: the master keeps those bits, and the
      // copy the next forward multiplies by is the new master rounded.
      const matrix = `${layerPrefix(1)}.self_attn.o_proj.weight`;
      optimizer.step();
      const master = await engine.read(params.get(matrix));
      const before = values.get(matrix)!;
      expect(master.some((x, i) => x !== before[i])).toBe(true);
      const offGrid = master.filter((x) => x !== roundToHalf(dtype, [x])[0]).length;
      expect(offGrid).toBeGreaterThan(master.length / 2);
      trunk.forward(batch, { saveForBackward: false });
      expect(await engine.read(trunk.weights.get(matrix))).toEqual(roundToHalf(dtype, master));
      expect(trunk.weights.dtypeOf(matrix)).toBe(dtype);
    });

  it('refuses a compute copy for a LoRA or half-stored model', async () => {
    const engine = await gpuEngine();
    const config = tinyConfig('Qwen3ForCausalLM');
    const half = new DecoderTrunk(engine, config, createParameterArena(engine, config, 'stored-bf16', 'bf16'));
    expect(() => half.setComputeDtype('bf16')).toThrow(/stored-bf16: a bf16 compute copy needs float32 master/);
    half.setComputeDtype('f32');
  });
});
