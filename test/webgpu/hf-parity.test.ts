// The GPU model against Hugging Face transformers' own outputs (the outside-truth fixture hf/llama-tiny): logits,
// next-token log-probs and parameter gradients, for both position-id conventions.
import { it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { gpuEngine } from '../support/gpu-engine.ts';
import { expectClose } from '../support/arrays.ts';
import { describeWithFixtures, fixturePath, readFixtureJson } from '../support/fixtures.ts';
import { parseHfConfig } from '../../models/hf-config.ts';
import { parseSafetensors } from '../../models/safetensors.ts';
import { createParameterArena, uploadHfTensors, readHfTensors } from '../../models/parameter-store.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { uploadTokenBatch } from '../../models/token-batch.ts';
import { Arena } from '../../engine/index.ts';

const LLAMA_TINY = ['hf/llama-tiny/fixtures.json', 'hf/llama-tiny/config.json', 'hf/llama-tiny/model.safetensors'];

describeWithFixtures('llama-tiny matches transformers', LLAMA_TINY, () => {
  const fixture = readFixtureJson('hf/llama-tiny/fixtures.json');
  const config = parseHfConfig(
    readFileSync(fixturePath('hf/llama-tiny/config.json'), 'utf8'),
    'llama-tiny/config.json',
  );
  const weights = parseSafetensors(
    new Uint8Array(readFileSync(fixturePath('hf/llama-tiny/model.safetensors'))),
    'llama-tiny/model.safetensors',
  );

  async function loadModel() {
    const engine = await gpuEngine();
    const params = createParameterArena(engine, config, 'llama-tiny');
    uploadHfTensors(
      engine,
      params,
      config,
      (name) => {
        const data = weights.tensors.get(name);
        const info = weights.header.tensors.find((t) => t.name === name);
        return data && info ? { shape: info.shape, data: Float32Array.from(data) } : undefined;
      },
      'llama-tiny',
    );
    return { engine, params, model: new CausalLm(engine, config, params) };
  }

  const ids: number[][] = fixture.input_ids;
  const mask: number[][] = fixture.attention_mask;
  const B = ids.length;
  const T = ids[0].length;
  const V = config.vocabSize;

  for (const runName of ['hf_forward_default', 'position_ids_from_mask'] as const) {
    it(`logits, log-probs and gradients (${runName})`, async () => {
      const { engine, params, model } = await loadModel();
      const run = fixture.runs[runName];
      const positionIds = runName === 'hf_forward_default' ? ids.map((row) => row.map((_, t) => t)) : undefined;
      const batch = uploadTokenBatch(engine, { inputIds: ids, attentionMask: mask, positionIds }, V);

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
      const gradTensors = await readHfTensors(engine, grads, config);
      for (const [name, expected] of Object.entries(run.grads as Record<string, { shape: number[]; data: number[] }>)) {
        const got = gradTensors.get(name);
        expect(got, name).toBeDefined();
        const scale = Math.max(...expected.data.map(Math.abs));
        // 1e-4 relative to the tensor's largest gradient: float32 accumulation order differs from PyTorch's.
        expectClose(got!.data, expected.data, 1e-4 * scale, 1e-4, `grad ${name}`);
      }
    });
  }
});
