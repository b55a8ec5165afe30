// A LoRA critic (issue 35 item 6): the value model's trunk carries adapters and its `score` head trains beside them
// in the adapters' arena (PEFT's modules_to_save). Outside truth: central differences of the float64 reference
// decoder with the adapters merged into its weights, then the value head (hidden·w + b), for Σ G ∘ values — the
// gradient the critic's value loss feeds back. The base arena gets no gradient (there is no arena for it). Then the
// PEFT round trip of adapters + score.
import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { expectClose, seededRandom } from '../support/arrays.ts';
import { numericGradient } from '../support/numeric-gradient.ts';
import { parseHfConfig } from '../../models/hf-config.ts';
import { initialParameters } from '../../models/init.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { ValueModel } from '../../models/value-model.ts';
import { LoraAdapters } from '../../models/lora-adapters.ts';
import {
  loraProjections,
  loraScaling,
  offBlockRanges,
  resolveTargetModules,
  type LoraSettings,
} from '../../models/lora.ts';
import { uploadTokenBatch, positionsFromMask } from '../../models/token-batch.ts';
import { decoderForwardRef } from '../../models/ref/decoder.ts';
import { Arena } from '../../engine/index.ts';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ADAPTER_CONFIG_FILE,
  loadLoraAdapter,
  readLoraAdapter,
  saveLoraAdapter,
} from '../../models/lora-files-node.ts';

const CRITIC = parseHfConfig({
  architectures: ['Qwen3ForTokenClassification'],
  num_labels: 1,
  vocab_size: 23,
  hidden_size: 16,
  intermediate_size: 20,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 8,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
});

const inputIds = [
  [3, 7, 1, 22, 9, 4],
  [0, 0, 5, 11, 2, 17],
];
const attentionMask = [
  [1, 1, 1, 1, 1, 1],
  [0, 0, 1, 1, 1, 1],
];

describe('LoRA critic', () => {
  it('adapter and score gradients of Σ G∘values match central differences of the merged float64 reference', async () => {
    const engine = await gpuEngine();
    const c = CRITIC;
    const s: LoraSettings = {
      rank: 2,
      alpha: 5,
      targetModules: resolveTargetModules(['all-linear'], null, 'critic.model.target_modules'),
      useRslora: false,
    };
    const scaling = loraScaling(s);
    const baseValues = initialParameters(c, 6, 0.3);
    const base = createParameterArena(engine, c, 'critic-lora-base');
    uploadArenaTensors(engine, base, baseValues);
    // Random A and Bᵀ (B non-zero, as after training); the off-block entries of a fused Bᵀ stay zero.
    const random = seededRandom(11);
    const projections = loraProjections(c, s);
    const loraValues = new Map<string, Float32Array>();
    for (const p of projections) {
      const n = p.modules.length * s.rank;
      loraValues.set(
        p.a,
        Float32Array.from({ length: n * p.inFeatures }, () => 0.6 * (random() - 0.5)),
      );
      const bT = new Float32Array(n * p.outFeatures);
      let column = 0;
      p.modules.forEach((m, i) => {
        for (let j = i * s.rank; j < (i + 1) * s.rank; j++)
          for (let o = column; o < column + m.width; o++) bT[j * p.outFeatures + o] = 0.6 * (random() - 0.5);
        column += m.width;
      });
      loraValues.set(p.bT, bT);
    }
    const headEntries = [
      { name: 'score.weight', shape: [1, c.hiddenSize] },
      { name: 'score.bias', shape: [1] },
    ];
    // A trained head differs from the base checkpoint's: the forward must read the adapters' copy.
    for (const { name } of headEntries)
      loraValues.set(
        name,
        baseValues.get(name)!.map((x) => x + random() - 0.5),
      );
    const adapters = new LoraAdapters(engine, c, s, loraValues, 'critic-lora', headEntries);
    const critic = new ValueModel(engine, c, base);
    critic.trunk.lora = adapters;
    const B = inputIds.length;
    const T = inputIds[0].length;
    const real = attentionMask.flat();
    const batch = uploadTokenBatch(engine, { inputIds, attentionMask }, c.vocabSize);
    const values = await engine.read(critic.tokenValues(batch, { saveForBackward: true }));
    const G = Float64Array.from({ length: B * T }, (_, i) => (real[i] ? random() - 0.5 : 0));
    const grads = new Arena(engine, 'critic-lora.grads', adapters.params.layout);
    critic.backward(engine.tensorFrom('dValues', [B * T], G), grads);
    adapters.clearOffBlockGradients(grads);

    const v64 = new Map([...loraValues].map(([k, v]) => [k, Float64Array.from(v)]));
    const refBatch = {
      B,
      T,
      ids: inputIds.flat(),
      keyMask: real,
      positions: attentionMask.flatMap((m) => positionsFromMask(m)),
    };
    const refValues = () => {
      const params = new Map<string, ArrayLike<number>>(baseValues);
      for (const p of projections) {
        const weightName = p.a.replace('.lora_A', '.weight');
        const w = Float64Array.from(baseValues.get(weightName)!);
        const a = v64.get(p.a)!;
        const bT = v64.get(p.bT)!;
        const n = a.length / p.inFeatures;
        for (let o = 0; o < p.outFeatures; o++)
          for (let k = 0; k < p.inFeatures; k++) {
            let d = 0;
            for (let j = 0; j < n; j++) d += bT[j * p.outFeatures + o] * a[j * p.inFeatures + k];
            w[o * p.inFeatures + k] += scaling * d;
          }
        params.set(weightName, w);
      }
      const hidden = decoderForwardRef(c, params, refBatch).hidden;
      const w = v64.get('score.weight')!;
      const b = v64.get('score.bias')![0];
      return Array.from({ length: B * T }, (_, r) => {
        let sum = b;
        for (let k = 0; k < c.hiddenSize; k++) sum += hidden[r * c.hiddenSize + k] * w[k];
        return sum;
      });
    };
    // The forward: the adapters change the values (so the test is not of the base model).
    const adapted = refValues();
    expectClose(
      values.filter((_, i) => real[i]),
      adapted.filter((_, i) => real[i]),
      2e-5,
      1e-4,
      'values',
    );
    const loss = () => refValues().reduce((sum, v, i) => sum + G[i] * v, 0);
    const names = [
      'score.weight',
      'score.bias',
      projections[0].a,
      projections[0].bT,
      projections[projections.length - 1].a,
      projections[projections.length - 1].bT,
    ];
    for (const name of names) {
      const numeric = numericGradient(v64.get(name)!, loss, 1e-5);
      // A fused Bᵀ's off-block entries are held at zero (cleared from the engine's gradient).
      const p = projections.find((x) => x.bT === name);
      if (p) for (const [lo, hi] of offBlockRanges(p, s)) numeric.fill(0, lo, hi);
      const got = await engine.read(grads.get(name));
      const scale = Math.max(...Array.from(numeric, Math.abs));
      expect(scale).toBeGreaterThan(1e-3);
      expectClose(got, numeric, 2e-4 * scale, 1e-3, `gradient of ${name}`);
    }
    // `score` trains in the adapters' arena; the base arena's head is only the starting value.
    expect(adapters.params.has('score.weight') && !grads.has('model.norm.weight')).toBe(true);

    // Saved as PEFT saves a LoRA critic: modules_to_save ["score"], the head under its saved name, and loaded
    // back bit for bit; an adapter without the head cannot be loaded as a critic's.
    const dir = await mkdtemp(join(tmpdir(), 'critic-lora-'));
    await saveLoraAdapter(dir, adapters, null);
    const json = JSON.parse(await readFile(join(dir, ADAPTER_CONFIG_FILE), 'utf8'));
    expect([json.modules_to_save, json.task_type]).toEqual([['score'], 'TOKEN_CLS']);
    const { tensors } = await readLoraAdapter(dir, ['score']);
    expect(tensors.get('base_model.model.score.weight')?.shape).toEqual([1, c.hiddenSize]);
    const loaded = await loadLoraAdapter(engine, dir, c, 'critic-lora-loaded', headEntries);
    const [before, after] = [await adapters.read(), await loaded.read()];
    expect([...after.keys()]).toEqual([...before.keys()]);
    for (const [name, data] of before) expect(after.get(name), name).toEqual(data);
    await expect(readLoraAdapter(dir)).rejects.toThrow(/modules_to_save=\["score"\] is not supported/);
    const plain = new LoraAdapters(engine, c, s, loraValues, 'critic-lora-plain');
    await saveLoraAdapter(dir, plain, null);
    await expect(loadLoraAdapter(engine, dir, c, 'x', headEntries)).rejects.toThrow(
      /base_model\.model\.score\.weight is missing/,
    );
  });
});
