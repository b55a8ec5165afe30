// The GPU models against Hugging Face transformers' own outputs (the outside-truth fixtures hf/<model>), for both
// position-id conventions: the causal LMs' logits, next-token log-probs and parameter gradients (llama-tiny;
// qwen2-tiny: q/k/v biases and a tied embedding; qwen3-tiny: q/k norms and a head_dim apart from hidden / heads), and
// a critic's per-token values and gradients (qwen3-critic-tiny, Qwen3ForTokenClassification: a score head with a
// bias).
import { it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { gpuEngine } from '../support/gpu-engine.ts';
import { expectClose } from '../support/arrays.ts';
import { describeWithFixtures, fixturePath, readFixtureJson } from '../support/fixtures.ts';
import { parseHfConfig } from '../../models/hf-config.ts';
import { parseSafetensors } from '../../models/safetensors.ts';
import { createParameterArena, uploadHfTensors, readHfTensors } from '../../models/parameter-store.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { ValueModel } from '../../models/value-model.ts';
import { uploadTokenBatch } from '../../models/token-batch.ts';
import { Arena, type Engine } from '../../engine/index.ts';

const RUNS = ['hf_forward_default', 'position_ids_from_mask'] as const;
type RecordedGrad = { shape: number[]; data: number[] } | { same_tensor_as: string };

function fixtureFiles(model: string): string[] {
  return ['fixtures.json', 'config.json', 'model.safetensors'].map((file) => `hf/${model}/${file}`);
}

/** The fixture, and a fresh engine's copy of its model's weights. */
function hfModel(model: string) {
  const fixture = readFixtureJson(`hf/${model}/fixtures.json`);
  const config = parseHfConfig(readFileSync(fixturePath(`hf/${model}/config.json`), 'utf8'), `${model}/config.json`);
  const weights = parseSafetensors(
    new Uint8Array(readFileSync(fixturePath(`hf/${model}/model.safetensors`))),
    `${model}/model.safetensors`,
  );
  async function load() {
    const engine = await gpuEngine();
    const params = createParameterArena(engine, config, model);
    uploadHfTensors(
      engine,
      params,
      config,
      (name) => {
        const data = weights.tensors.get(name);
        const info = weights.header.tensors.find((t) => t.name === name);
        return data && info ? { shape: info.shape, data: Float32Array.from(data) } : undefined;
      },
      model,
    );
    return { engine, params };
  }
  const ids: number[][] = fixture.input_ids;
  const mask: number[][] = fixture.attention_mask;
  /** hf_forward_default: arange(T) on every row, left padding ignored; else the engine's from the mask. */
  const batchOf = (engine: Engine, runName: (typeof RUNS)[number]) =>
    uploadTokenBatch(
      engine,
      {
        inputIds: ids,
        attentionMask: mask,
        positionIds: runName === 'hf_forward_default' ? ids.map((row) => row.map((_, t) => t)) : undefined,
      },
      config.vocabSize,
    );
  return { fixture, config, load, ids, mask, B: ids.length, T: ids[0].length, batchOf };
}

/** Every recorded gradient, to 1e-4 of the tensor's largest: float32 accumulation order differs from PyTorch's. */
async function expectHfGrads(engine: Engine, grads: Arena, config: ReturnType<typeof parseHfConfig>, recorded: object) {
  const got = await readHfTensors(engine, grads, config);
  for (const [name, expected] of Object.entries(recorded as Record<string, RecordedGrad>)) {
    if ('same_tensor_as' in expected) {
      // A tied lm_head is the embedding: its gradient is recorded (and read) under the embedding's name only.
      expect(got.get(name), name).toBeUndefined();
      expect(got.get(expected.same_tensor_as), expected.same_tensor_as).toBeDefined();
      continue;
    }
    expect(got.get(name), name).toBeDefined();
    const scale = Math.max(...expected.data.map(Math.abs));
    expectClose(got.get(name)!.data, expected.data, 1e-4 * scale, 1e-4, `grad ${name}`);
  }
}

for (const model of ['llama-tiny', 'qwen2-tiny', 'qwen3-tiny']) {
  describeWithFixtures(`${model} matches transformers`, fixtureFiles(model), () => {
    const { fixture, config, load, mask, ids, B, T, batchOf } = hfModel(model);
    const V = config.vocabSize;

    for (const runName of RUNS) {
      it(`logits, log-probs and gradients (${runName})`, async () => {
        const { engine, params } = await load();
        const model = new CausalLm(engine, config, params);
        const run = fixture.runs[runName];
        const batch = batchOf(engine, runName);

        const logits = await engine.read(model.logits(batch, engine.tensor('logits', [B * T, V])));
        for (let b = 0; b < B; b++) {
          for (let t = 0; t < T; t++) {
            if (!mask[b][t]) continue;
            expectClose(
              logits.subarray((b * T + t) * V, (b * T + t + 1) * V),
              run.logits[b][t],
              1e-4,
              0,
              `logits[${b}][${t}]`,
            );
          }
        }

        const targets = new Uint32Array(B * T);
        const weightsOfLoss = new Float32Array(B * T);
        for (let b = 0; b < B; b++) {
          for (let t = 0; t + 1 < T; t++) {
            targets[b * T + t] = ids[b][t + 1];
            weightsOfLoss[b * T + t] = run.loss_mask[b][t];
          }
        }
        const out = model.tokenLogprobs(batch, engine.tensorFrom('targets', [B * T], targets, 'u32'), {
          saveForBackward: true,
        });
        const logprobs = await engine.read(out.logprobs);
        for (let b = 0; b < B; b++) {
          for (let t = 0; t + 1 < T; t++) {
            if (run.loss_mask[b][t])
              expect(Math.abs(logprobs[b * T + t] - run.next_token_logprobs[b][t])).toBeLessThan(1e-4);
          }
        }

        const grads = new Arena(engine, 'grads', params.layout);
        model.backward(engine.tensorFrom('dLogprobs', [B * T], weightsOfLoss), null, grads);
        await expectHfGrads(engine, grads, config, run.grads);
      });
    }
  });
}

describeWithFixtures('qwen3-critic-tiny matches transformers', fixtureFiles('qwen3-critic-tiny'), () => {
  const { fixture, config, load, mask, B, T, batchOf } = hfModel('qwen3-critic-tiny');

  for (const runName of RUNS) {
    it(`values and gradients (${runName})`, async () => {
      const { engine, params } = await load();
      const critic = new ValueModel(engine, config, params);
      const run = fixture.runs[runName];
      const values = await engine.read(critic.tokenValues(batchOf(engine, runName), { saveForBackward: true }));
      for (let b = 0; b < B; b++) {
        for (let t = 0; t < T; t++) {
          if (mask[b][t])
            expect(Math.abs(values[b * T + t] - run.values[b][t]), `values[${b}][${t}]`).toBeLessThan(1e-4);
        }
      }
      // transformers' loss is Σ values · attention_mask: d loss / d values is the mask.
      const grads = new Arena(engine, 'grads', params.layout);
      critic.backward(engine.tensorFrom('dValues', [B * T], mask.flat()), grads);
      await expectHfGrads(engine, grads, config, run.grads);
    });
  }
});
