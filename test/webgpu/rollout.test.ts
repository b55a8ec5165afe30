// Rollout with a KV cache against the two outside truths it must agree with: a full recompute of every prefix
// (greedy tokens identical) and a teacher-forced pass of the finished sequences (old log-probs within 1e-4);
// and on a real checkpoint, the greedy story transformers generates.
import { describe, it, expect, vi } from 'vitest';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gpuEngine } from '../support/gpu-engine.ts';
import { randomPolicy } from '../support/random-policy.ts';
import type { Engine } from '../../engine/index.ts';
import { parseHfConfig, type DecoderConfig } from '../../models/hf-config.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { uploadTokenBatch, destroyTokenBatch } from '../../models/token-batch.ts';
import { loadModel } from '../../models/model-files-node.ts';
import { KvCache } from '../../models/kv-cache.ts';
import { IncrementalDecoder } from '../../models/incremental-decoder.ts';
import { LoraAdapters } from '../../models/lora-adapters.ts';
import { initialLoraValues, loraValuesFromPeft, peftTensors, resolveTargetModules } from '../../models/lora.ts';
import { seededRandom } from '../support/arrays.ts';
import { describeWithFixtures, fixturePath } from '../support/fixtures.ts';
import { RolloutGenerator } from '../../ppo/phases/rollout.ts';
import {
  VALIDATION_SAMPLING,
  type RolloutBatch,
  type RolloutConfig,
  type RolloutProgress,
  type PolicyWeights,
} from '../../ppo/generation/types.ts';
import { ScriptedEnvironment } from '../support/scripted-environment.ts';
import { generateWithoutCache } from '../../tools/bench/rollout-without-cache.ts';
import { RolloutDecoders } from '../../ppo/generation/decoders.ts';
import { BatchQueue } from '../../ppo/generation/batch-queue.ts';
import { assemble, promptBatch } from '../../ppo/generation/sample-records.ts';
import {
  continuousCacheCapacity,
  decodeContinuous,
  type QueuedSample,
  type SampleQueue,
} from '../../ppo/generation/continuous-batching.ts';

const STORIES = fixturePath('hf/stories260K');

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
    tie_word_embeddings: architecture.startsWith('Qwen3'),
  });
}

// Left padding exercised: three prompt lengths.
const PROMPTS = [[5, 9, 12, 3, 40], [7], [33, 2, 18]];

const BASE: RolloutConfig = {
  n: 2,
  temperature: 0.8,
  topK: -1,
  topP: 1,
  seed: 11,
  maxResponseLength: 12,
  eosTokenIds: [4, 17],
  padTokenId: 0,
};

/** Teacher-forced log-probs of each response token, at the rollout's temperature (1 for greedy). */
async function teacherForced(
  engine: Engine,
  policy: PolicyWeights,
  batch: RolloutBatch,
  temperature: number,
): Promise<Float32Array> {
  const lm = new CausalLm(engine, policy.config, policy.params);
  lm.trunk.lora = policy.lora ?? null;
  const tokens = uploadTokenBatch(
    engine,
    { inputIds: batch.inputIds, attentionMask: batch.attentionMask, positionIds: batch.positionIds },
    policy.config.vocabSize,
  );
  const T = batch.promptLength + batch.responseLength;
  const targets = batch.inputIds.flatMap((row) => [...row.slice(1), 0]);
  const targetTensor = engine.tensorFrom('targets', [targets.length], targets, 'u32');
  const { logprobs } = lm.tokenLogprobs(tokens, targetTensor, {
    temperature: temperature || 1,
    saveForBackward: false,
  });
  const all = await engine.read(logprobs);
  destroyTokenBatch(engine, tokens);
  engine.destroyTensor(targetTensor);
  // Response token t of row i is predicted at position P + t − 1.
  const out = new Float32Array(batch.inputIds.length * batch.responseLength);
  batch.inputIds.forEach((_, i) => {
    for (let t = 0; t < batch.responseLength; t++)
      out[i * batch.responseLength + t] = all[i * T + batch.promptLength + t - 1];
  });
  return out;
}

function expectWellFormed(batch: RolloutBatch, c: RolloutConfig): void {
  const P = batch.promptLength;
  const R = c.maxResponseLength;
  expect(batch.groupIds).toEqual(PROMPTS.flatMap((_, g) => new Array(c.n).fill(g)));
  batch.inputIds.forEach((row, i) => {
    const prompt = PROMPTS[batch.groupIds[i]];
    const length = batch.responseLengths[i];
    expect(row.slice(0, P)).toEqual([...new Array(P - prompt.length).fill(c.padTokenId), ...prompt]);
    expect(batch.attentionMask[i]).toEqual([
      ...new Array(P - prompt.length).fill(0),
      ...new Array(prompt.length + length).fill(1),
      ...new Array(R - length).fill(0),
    ]);
    expect(batch.responseMask[i]).toEqual([...new Array(length).fill(1), ...new Array(R - length).fill(0)]);
    expect(batch.positionIds[i].slice(P - prompt.length, P + length)).toEqual(
      Array.from({ length: prompt.length + length }, (_, t) => t),
    );
    expect(batch.responses[i].slice(length)).toEqual(new Array(R - length).fill(c.padTokenId));
    const response = batch.responses[i].slice(0, length);
    const eosAt = response.findIndex((id) => c.eosTokenIds.includes(id));
    if (batch.finishReasons[i] === 'eos') expect(eosAt).toBe(length - 1);
    else expect(eosAt).toBe(-1);
    if (batch.finishReasons[i] === 'length') expect(length).toBe(R);
    expect(Array.from(batch.oldLogProbs[i].subarray(length)).every((x) => x === 0)).toBe(true);
  });
}

describe('rollout', () => {
  for (const architecture of ['LlamaForCausalLM', 'Qwen3ForCausalLM']) {
    it(`${architecture}: greedy with the cache gives exactly the tokens of a full recompute`, async () => {
      const engine = await gpuEngine();
      const policy = randomPolicy(engine, config(architecture), 1);
      const c = { ...BASE, ...VALIDATION_SAMPLING, n: 1, eosTokenIds: [] };
      const cached = await new RolloutGenerator(engine, policy).generate(PROMPTS, c);
      const recomputed = await generateWithoutCache(new CausalLm(engine, policy.config, policy.params), PROMPTS, c);
      expect(cached.responses).toEqual(recomputed.responses);
      // the generation is not degenerate (one token repeated)
      expect(new Set(cached.responses.flat()).size).toBeGreaterThan(3);
      cached.oldLogProbs.forEach((row, i) => {
        for (let t = 0; t < row.length; t++) expect(Math.abs(row[t] - recomputed.oldLogProbs[i][t])).toBeLessThan(1e-5);
      });
    });
  }

  it('old log-probs equal a teacher-forced pass within 1e-4 (sampled, top-k + top-p, eos stops, n = 2)', async () => {
    const engine = await gpuEngine();
    const policy = randomPolicy(engine, config('Qwen3ForCausalLM'), 2);
    const c: RolloutConfig = { ...BASE, temperature: 0.7, topK: 20, topP: 0.9, readEvery: 3 };
    const batch = await new RolloutGenerator(engine, policy).generate(PROMPTS, c);
    expectWellFormed(batch, c);
    expect(batch.finishReasons).toContain('eos');
    const reference = await teacherForced(engine, policy, batch, c.temperature);
    let compared = 0;
    batch.oldLogProbs.forEach((row, i) => {
      for (let t = 0; t < batch.responseLengths[i]; t++) {
        expect(Math.abs(row[t] - reference[i * c.maxResponseLength + t]), `sample ${i} token ${t}`).toBeLessThan(1e-4);
        compared++;
      }
    });
    expect(compared).toBeGreaterThan(20);
  });

  it(
    "with LoRA adapters: old log-probs equal the adapted training forward's, and differ from the base " + "model's",
    async () => {
      const engine = await gpuEngine();
      const base = randomPolicy(engine, config('Qwen3ForCausalLM'), 2);
      const settings = {
        rank: 4,
        alpha: 8,
        targetModules: resolveTargetModules(['all-linear'], null, 'target_modules'),
        useRslora: false,
      };
      // Trained-looking adapters: PEFT's A and a random (non-zero) B.
      const peft = peftTensors(base.config, settings, initialLoraValues(base.config, settings, 5));
      const random = seededRandom(6);
      for (const [name, t] of peft)
        if (name.endsWith('.lora_B.weight')) t.data.forEach((_, i, b) => (b[i] = random() - 0.5));
      const values = loraValuesFromPeft(base.config, settings, (n) => peft.get(n), 'test');
      const policy = { ...base, lora: new LoraAdapters(engine, base.config, settings, values, 'rollout-lora') };
      const c: RolloutConfig = { ...BASE, temperature: 0.7, topK: 20, topP: 0.9 };
      const batch = await new RolloutGenerator(engine, policy).generate(PROMPTS, c);
      const adapted = await teacherForced(engine, policy, batch, c.temperature);
      const plain = await teacherForced(engine, base, batch, c.temperature);
      let differs = 0;
      batch.oldLogProbs.forEach((row, i) => {
        for (let t = 0; t < batch.responseLengths[i]; t++) {
          expect(Math.abs(row[t] - adapted[i * c.maxResponseLength + t]), `sample ${i} token ${t}`).toBeLessThan(1e-4);
          if (Math.abs(row[t] - plain[i * c.maxResponseLength + t]) > 1e-2) differs++;
        }
      });
      expect(differs).toBeGreaterThan(5);
    },
  );

  it("ignoreEos (verl's rollout.ignore_eos): responses go on past an EOS to the budget, log-probs unprocessed", async () => {
    const engine = await gpuEngine();
    const policy = randomPolicy(engine, config('Qwen3ForCausalLM'), 2);
    const c: RolloutConfig = { ...BASE, temperature: 0.7, topK: 20, topP: 0.9, readEvery: 3 };
    const generator = new RolloutGenerator(engine, policy);
    const stopped = await generator.generate(PROMPTS, c);
    const going = await generator.generate(PROMPTS, { ...c, ignoreEos: true });
    expect(going.finishReasons.every((r) => r === 'length')).toBe(true);
    expect(going.responseLengths).toEqual(new Array(going.responses.length).fill(c.maxResponseLength));
    let continued = 0;
    stopped.responses.forEach((row, i) => {
      const length = stopped.responseLengths[i];
      // The same random streams: the same tokens up to the EOS that ended the sample, then more.
      expect(going.responses[i].slice(0, length)).toEqual(row.slice(0, length));
      if (stopped.finishReasons[i] === 'eos') continued++;
    });
    expect(continued).toBeGreaterThan(0);
    // EOS is not masked (vLLM's ignore_eos): the old log-probs are still the policy's own, teacher-forced.
    const reference = await teacherForced(engine, policy, going, c.temperature);
    going.oldLogProbs.forEach((row, i) => {
      for (let t = 0; t < c.maxResponseLength; t++)
        expect(Math.abs(row[t] - reference[i * c.maxResponseLength + t]), `sample ${i} token ${t}`).toBeLessThan(1e-4);
    });
    generator.release();
  });

  it('is reproducible from the seed, and dropping finished rows changes nothing', async () => {
    const engine = await gpuEngine();
    const policy = randomPolicy(engine, config('LlamaForCausalLM'), 3);
    // Many eos ids: rows finish at different steps, so compaction happens several times.
    const c: RolloutConfig = { ...BASE, n: 3, eosTokenIds: [4, 17, 21, 30, 44, 50], readEvery: 2, compactBelow: 0 };
    const generator = new RolloutGenerator(engine, policy);
    const plain = await generator.generate(PROMPTS, c);
    expectWellFormed(plain, c);
    const lengths = new Set(plain.responseLengths);
    expect(lengths.size).toBeGreaterThan(2);
    const compacted = await generator.generate(PROMPTS, { ...c, compactBelow: 1 });
    expect(compacted.responses).toEqual(plain.responses);
    compacted.oldLogProbs.forEach((row, i) => {
      for (let t = 0; t < row.length; t++) expect(Math.abs(row[t] - plain.oldLogProbs[i][t])).toBeLessThan(1e-5);
    });
    const reseeded = await generator.generate(PROMPTS, { ...c, seed: c.seed + 1 });
    expect(reseeded.responses).not.toEqual(plain.responses);
    // the samples of one group differ from each other
    expect(plain.responses[0]).not.toEqual(plain.responses[1]);
  });

  it(
    "decodes no step past the last sample's budget: R tokens without eos take R − 1 decode steps, whatever " +
      'readEvery',
    async () => {
      const engine = await gpuEngine();
      const policy = randomPolicy(engine, config('Qwen3ForCausalLM'), 5);
      const generator = new RolloutGenerator(engine, policy);
      const extend = vi.spyOn(IncrementalDecoder.prototype, 'extend');
      try {
        for (const readEvery of [1, 5, 8]) {
          extend.mockClear();
          const c: RolloutConfig = { ...BASE, eosTokenIds: [], readEvery };
          const batch = await generator.generate(PROMPTS, c);
          expect(batch.responseLengths).toEqual(new Array(PROMPTS.length * c.n).fill(c.maxResponseLength));
          expect(extend.mock.calls.filter(([input]) => input.T === 1).length).toBe(c.maxResponseLength - 1);
        }
      } finally {
        extend.mockRestore();
      }
    },
  );

  it('stops at a stop string, keeping the token that completes it', async () => {
    const engine = await gpuEngine();
    const policy = randomPolicy(engine, config('LlamaForCausalLM'), 4);
    const decode = (ids: readonly number[]) => ids.map((id) => String.fromCharCode(48 + id)).join('');
    const c: RolloutConfig = { ...BASE, eosTokenIds: [], readEvery: 4, decode };
    const generator = new RolloutGenerator(engine, policy);
    const free = await generator.generate(PROMPTS, c);
    // a two-token string that the free run produces mid-response in sample 0
    const stop = decode(free.responses[0].slice(3, 5));
    const stopped = await generator.generate(PROMPTS, { ...c, stopStrings: [stop] });
    expect(stopped.finishReasons[0]).toBe('stop');
    stopped.responses.forEach((row, i) => {
      const text = decode(row.slice(0, stopped.responseLengths[i]));
      if (stopped.finishReasons[i] === 'stop') {
        expect(text.endsWith(stop)).toBe(true);
        expect(decode(row.slice(0, stopped.responseLengths[i] - 1)).includes(stop)).toBe(false);
      } else {
        expect(text.includes(stop)).toBe(false);
      }
      // up to the stop, the same tokens as without stop strings (same seed)
      expect(row.slice(0, stopped.responseLengths[i])).toEqual(free.responses[i].slice(0, stopped.responseLengths[i]));
    });
  });

  describeWithFixtures('on a real checkpoint', ['hf/stories260K'], () => {
    it('stories260K: greedy from <s> reproduces the recorded transformers story', async () => {
      const engine = await gpuEngine();
      const fixture = JSON.parse(await readFile(join(STORIES, 'fixtures.json'), 'utf8')).greedy_from_bos;
      const model = await loadModel(engine, STORIES);
      const generation = model.checkpoint.generationConfig!;
      // The story holds no eos id (2 or 1), so stopping on them still runs all max_new_tokens, as recorded.
      const batch = await new RolloutGenerator(engine, model).generate([fixture.input_ids], {
        ...VALIDATION_SAMPLING,
        seed: 0,
        maxResponseLength: fixture.max_new_tokens,
        eosTokenIds: generation.eosTokenIds,
        padTokenId: 0,
      });
      expect([...fixture.input_ids, ...batch.responses[0]]).toEqual(fixture.output_ids);
    });
  });
});

describe('continuous batching', () => {
  // Six prompt lengths, two samples each: 12 samples whose responses end at many different steps.
  const prompts = [...PROMPTS, [8, 8], [1, 2, 3, 6, 7, 9, 10], [19]];

  for (const [what, sampling] of [
    ['greedy', VALIDATION_SAMPLING],
    ['sampled', { temperature: 0.9, topK: -1, topP: 0.95 }],
  ] as const) {
    it(
      `${what}: 3 slots for 12 samples give the tokens and old log-probs of one batch; slots refill and the cache ` +
        `shifts`,
      async () => {
        const engine = await gpuEngine();
        const policy = randomPolicy(engine, config('Qwen3ForCausalLM'), 5);
        const c: RolloutConfig = {
          ...BASE,
          ...sampling,
          n: 2,
          maxResponseLength: 40,
          eosTokenIds: [4, 17, 30],
          readEvery: 2,
        };
        const generator = new RolloutGenerator(engine, policy);
        const one = await generator.generate(prompts, c);
        const shift = vi.spyOn(KvCache.prototype, 'shiftSlots');
        const import_ = vi.spyOn(KvCache.prototype, 'importRows');
        const reports: RolloutProgress[] = [];
        const slotted = await generator.generate(prompts, { ...c, maxSlots: 3, onProgress: (p) => reports.push(p) });
        // Progress as samples end: of all 12, never going back, the tokens those reads had seen.
        expect(reports.length).toBeGreaterThan(3);
        expect(reports.every((p) => p.total === 12)).toBe(true);
        reports
          .slice(1)
          .forEach((p, i) => expect(p.done >= reports[i].done && p.tokens >= reports[i].tokens).toBe(true));
        expect(reports.at(-1)!.done).toBeGreaterThan(6);
        expect(reports.at(-1)!.tokens).toBeLessThanOrEqual(slotted.responseLengths.reduce((a, b) => a + b, 0));
        // the first fill, then refills one or two rows at a time; the shared index passed the capacity
        expect(import_.mock.calls.length).toBeGreaterThan(4);
        expect(shift).toHaveBeenCalled();
        shift.mockRestore();
        import_.mockRestore();
        expect(new Set(one.responseLengths).size).toBeGreaterThan(3);
        expect(one.finishReasons).toContain('eos');
        expect(slotted.responses).toEqual(one.responses);
        expect(slotted.finishReasons).toEqual(one.finishReasons);
        slotted.oldLogProbs.forEach((row, i) => {
          for (let t = 0; t < row.length; t++)
            expect(Math.abs(row[t] - one.oldLogProbs[i][t]), `sample ${i} token ${t}`).toBeLessThan(1e-5);
        });
        const recomputed = await generateWithoutCache(new CausalLm(engine, policy.config, policy.params), prompts, c);
        expect(slotted.responses).toEqual(recomputed.responses);
      },
    );
  }

  // rollout.dtype=bfloat16: the half cache's rows are imported, shifted and dropped as words (two values each), so
  // any slot count still gives one batch's tokens and log-probs.
  it('a bfloat16 rollout: 3 slots for 12 samples give the tokens and old log-probs of one batch', async () => {
    const engine = await gpuEngine();
    const policy = randomPolicy(engine, config('Qwen3ForCausalLM'), 5);
    const c: RolloutConfig = {
      ...BASE,
      temperature: 0.9,
      topK: -1,
      topP: 0.95,
      n: 2,
      maxResponseLength: 40,
      eosTokenIds: [4, 17, 30],
      readEvery: 2,
    };
    const generator = new RolloutGenerator(engine, policy, 'bf16');
    const one = await generator.generate(prompts, c);
    const shift = vi.spyOn(KvCache.prototype, 'shiftSlots');
    const import_ = vi.spyOn(KvCache.prototype, 'importRows');
    const slotted = await generator.generate(prompts, { ...c, maxSlots: 3 });
    expect(import_.mock.calls.length).toBeGreaterThan(4);
    expect(shift).toHaveBeenCalled();
    shift.mockRestore();
    import_.mockRestore();
    expect(new Set(one.responseLengths).size).toBeGreaterThan(3);
    expect(slotted.responses).toEqual(one.responses);
    slotted.oldLogProbs.forEach((row, i) => {
      for (let t = 0; t < row.length; t++)
        expect(Math.abs(row[t] - one.oldLogProbs[i][t]), `sample ${i} token ${t}`).toBeLessThan(1e-5);
    });
    generator.release();
  });

  it(
    'samples that arrive after the batch dropped its finished rows join as new rows, with the tokens and old ' +
      'log-probs of one batch',
    async () => {
      const engine = await gpuEngine();
      const policy = randomPolicy(engine, config('Qwen3ForCausalLM'), 5);
      const c: RolloutConfig = {
        ...BASE,
        temperature: 0.9,
        topP: 0.95,
        n: 2,
        maxResponseLength: 40,
        eosTokenIds: [4, 17, 30],
        readEvery: 2,
      };
      const one = await new RolloutGenerator(engine, policy).generate(prompts, c);
      // The longest sample decodes alone once the shortest has ended, until the others arrive.
      const lengths = one.responseLengths;
      const longest = lengths.indexOf(Math.max(...lengths));
      const shortest = lengths.indexOf(Math.min(...lengths));
      expect(lengths[longest] - lengths[shortest]).toBeGreaterThan(6 * c.readEvery!);
      const batch = promptBatch(prompts, c);
      const queue = new BatchQueue(batch, c);
      const rowsPerStep: number[] = [];
      const slots = 4;
      const decoders = new RolloutDecoders(engine, policy);
      await decodeContinuous(
        decoders,
        new ArrivingQueue(
          queue,
          [longest, shortest].sort((a, b) => a - b),
        ),
        { ...c, P: batch.P, R: c.maxResponseLength, compactBelow: 1, onDecodeStep: (rows) => rowsPerStep.push(rows) },
        slots,
        continuousCacheCapacity(batch.P, c.maxResponseLength, c.readEvery!),
      );
      decoders.destroy();
      // Two rows, one after the shortest ended, all four once the others arrived, fewer again as they end.
      const full = rowsPerStep.indexOf(slots);
      expect(rowsPerStep[0]).toBe(2);
      expect(full).toBeGreaterThan(0);
      expect(rowsPerStep.slice(0, full)).toContain(1);
      expect(rowsPerStep.at(-1)).toBeLessThan(slots);
      const arrived = assemble(batch, queue.records(), c);
      expect(arrived.responses).toEqual(one.responses);
      expect(arrived.finishReasons).toEqual(one.finishReasons);
      arrived.oldLogProbs.forEach((row, i) => {
        for (let t = 0; t < row.length; t++)
          expect(Math.abs(row[t] - one.oldLogProbs[i][t]), `sample ${i} token ${t}`).toBeLessThan(1e-5);
      });
    },
  );

  it('samples admitted together into consecutive rows start with one upload per per-row tensor, not per row', async () => {
    const engine = await gpuEngine();
    const policy = randomPolicy(engine, config('Qwen3ForCausalLM'), 5);
    const uploadsFor = async (n: number) => {
      const before = engine.transfers.uploads;
      await new RolloutGenerator(engine, policy).generate(PROMPTS, { ...BASE, n, maxResponseLength: 1 });
      return engine.transfers.uploads - before;
    };
    // 6 and 24 samples, each batch admitted at once: 18 more samples, one upload more each as it ends (its finished
    // flag); starting a row on its own took 4-5 more each (90 here).
    expect((await uploadsFor(8)) - (await uploadsFor(2))).toBeLessThanOrEqual(18);
  });

  it('prefills upload into two input buffers kept between admissions, not two new buffers each', async () => {
    const engine = await gpuEngine();
    const policy = randomPolicy(engine, config('Qwen3ForCausalLM'), 5);
    const labels: string[] = [];
    const device = engine.device;
    const createBuffer = device.createBuffer;
    device.createBuffer = (descriptor: GPUBufferDescriptor) => {
      labels.push(descriptor.label ?? '');
      return createBuffer.call(device, descriptor);
    };
    let prefills = 0;
    try {
      // 12 samples on 2 slots: rows refill one or two at a time.
      await new RolloutGenerator(engine, policy).generate(PROMPTS, {
        ...BASE,
        n: 4,
        maxSlots: 2,
        onPrefill: () => prefills++,
      });
    } finally {
      device.createBuffer = createBuffer;
    }
    expect(prefills).toBeGreaterThan(4);
    // The ids and the positions, once each (a wider block would grow them: these prompts are at most 5 tokens).
    expect(labels.filter((l) => l.startsWith('rollout.block')).sort()).toEqual([
      'rollout.block.ids',
      'rollout.block.positions',
    ]);
  });

  it(
    "a server's loop admits a sample at the step after it arrives, and the host sees a sample end one step after " +
      'its last token, where a waiting one takes its row; tokens and old log-probs of one batch',
    async () => {
      const engine = await gpuEngine();
      const policy = randomPolicy(engine, config('Qwen3ForCausalLM'), 5);
      const c: RolloutConfig = {
        ...BASE,
        temperature: 0.9,
        topP: 0.95,
        n: 4,
        maxResponseLength: 40,
        eosTokenIds: [4, 17, 30],
        readEvery: 2,
      };
      const one = await new RolloutGenerator(engine, policy).generate(PROMPTS, c);
      const batch = promptBatch(PROMPTS, c);
      const queue = new StepQueue(new BatchQueue(batch, c));
      const slots = 3;
      const rowsPerStep: number[] = [];
      const decoders = new RolloutDecoders(engine, policy);
      const readbacks = engine.transfers.readbacks;
      await decodeContinuous(
        decoders,
        queue,
        {
          ...c,
          P: batch.P,
          R: c.maxResponseLength,
          onDecodeStep: (rows) => {
            rowsPerStep.push(rows);
            queue.step(rowsPerStep.length);
          },
          eager: {
            lag: 1,
            emptyRowSteps: c.readEvery!,
            between: () => new Promise((resolve) => setImmediate(resolve)),
          },
        },
        slots,
        continuousCacheCapacity(batch.P, c.maxResponseLength, c.readEvery!),
      );
      decoders.destroy();
      // Tokens and log-probs leave in one read-back per decode step (and one at the end), not one per tensor.
      expect(engine.transfers.readbacks - readbacks).toBeLessThanOrEqual(rowsPerStep.length + 2);
      const arrived = assemble(batch, queue.batch.records(), c);
      expect(arrived.responses).toEqual(one.responses);
      expect(arrived.finishReasons).toEqual(one.finishReasons);
      arrived.oldLogProbs.forEach((row, i) => {
        for (let t = 0; t < row.length; t++)
          expect(Math.abs(row[t] - one.oldLogProbs[i][t]), `sample ${i} token ${t}`).toBeLessThan(1e-5);
      });
      // The second sample arrived after decode step 4, with a row free: taken before step 5, which decodes 2 rows
      // (the rollout's cadence takes samples at reads only: after step 2·k).
      expect(queue.takenAt[1]).toBe(StepQueue.SECOND_ARRIVES);
      expect(rowsPerStep.slice(0, StepQueue.SECOND_ARRIVES + 1)).toEqual([1, 1, 1, 1, 2]);
      // A sample taken after step a (firstDispatch a + 1) draws its last token L at dispatch a + 1 + L; the read
      // after it arrives one step later, at the next step's boundary: it ends after step a + L + 1. With reads every
      // readEvery steps acted on readEvery later, that was a + L + 1 + 0…2·readEvery − 1.
      const lengths = one.responseLengths;
      for (let i = 1; i < lengths.length; i++)
        expect(queue.finishedAt[i] - queue.takenAt[i], `sample ${i}`).toBe(lengths[i] + 1);
      // Each sample that ended while others waited gave its row to the next one at that step.
      const lastTaken = Math.max(...queue.takenAt);
      for (let i = 0; i < lengths.length; i++)
        if (queue.finishedAt[i] < lastTaken) expect(queue.takenAt, `sample ${i}`).toContain(queue.finishedAt[i]);
      // Once none waits, a row stays at most readEvery steps after its sample ended (step s decodes only the rows
      // of samples taken before it and ended at most readEvery steps before it).
      const kept = (step: number) =>
        lengths.filter((_, i) => queue.takenAt[i] < step && step <= queue.finishedAt[i] + c.readEvery!).length;
      for (let step = lastTaken + 1; step <= rowsPerStep.length; step++)
        expect(rowsPerStep[step - 1], `step ${step}`).toBeLessThanOrEqual(kept(step));
      expect(rowsPerStep.at(-1)).toBeLessThan(slots);
      // A compaction drops every empty row, not only those empty for readEvery steps: a step that decodes fewer rows
      // than the one before decodes only the rows whose samples the host has not released.
      const held = (step: number) =>
        lengths.filter((_, i) => queue.takenAt[i] < step && step <= queue.finishedAt[i]).length;
      let drops = 0;
      for (let step = lastTaken + 2; step <= rowsPerStep.length; step++)
        if (rowsPerStep[step - 1] < rowsPerStep[step - 2]) {
          drops++;
          expect(rowsPerStep[step - 1], `step ${step}`).toBe(held(step));
        }
      expect(drops).toBeGreaterThan(0);
    },
  );

  it(
    "a server's loop gathers samples arriving a step apart into one prefill (at most `gather` steps of waiting " +
      'while rows run), admits at once when nothing runs; tokens and old log-probs of one batch',
    async () => {
      const engine = await gpuEngine();
      const policy = randomPolicy(engine, config('Qwen3ForCausalLM'), 5);
      const c: RolloutConfig = { ...BASE, n: 3, maxResponseLength: 16, readEvery: 2 };
      const one = await new RolloutGenerator(engine, policy).generate(PROMPTS, c);
      const batch = promptBatch(PROMPTS, c);
      // Sample 0 waits from the start, sample k arrives after decode step k (closed-loop clients answered a step
      // apart); 9 samples, 9 slots: a row is free for each.
      const arrivals = Array.from({ length: 9 }, (_, k) => k);
      const run = async (gather: number) => {
        const queue = new ScheduledQueue(new BatchQueue(batch, c), arrivals);
        const prefills: number[] = [];
        const decoders = new RolloutDecoders(engine, policy);
        await decodeContinuous(
          decoders,
          queue,
          {
            ...c,
            P: batch.P,
            R: c.maxResponseLength,
            onDecodeStep: () => queue.step(),
            onPrefill: (rows) => prefills.push(rows),
            eager: {
              lag: 1,
              gather,
              emptyRowSteps: c.readEvery!,
              between: () => new Promise((resolve) => setImmediate(resolve)),
            },
          },
          9,
          continuousCacheCapacity(batch.P, c.maxResponseLength, c.readEvery!),
        );
        decoders.destroy();
        return { prefills, queue, rollout: assemble(batch, queue.batch.records(), c) };
      };
      const atOnce = await run(0);
      const gathered = await run(2);
      // At once: a prefill per arrival. Gathered: sample 0 alone (nothing ran), then one prefill per 3 steps (the
      // first arrival of a group waits 2 steps, the next ones 1 and 0).
      expect(atOnce.prefills).toEqual([1, 1, 1, 1, 1, 1, 1, 1, 1]);
      expect(gathered.prefills).toEqual([1, 3, 3, 2]);
      for (let k = 0; k < arrivals.length; k++) {
        expect(atOnce.queue.takenAt[k] - arrivals[k], `sample ${k}`).toBe(0);
        expect(gathered.queue.takenAt[k] - arrivals[k], `sample ${k}`).toBeLessThanOrEqual(2);
      }
      for (const { rollout } of [atOnce, gathered]) {
        expect(rollout.responses).toEqual(one.responses);
        expect(rollout.finishReasons).toEqual(one.finishReasons);
        rollout.oldLogProbs.forEach((row, i) => {
          for (let t = 0; t < row.length; t++)
            expect(Math.abs(row[t] - one.oldLogProbs[i][t]), `sample ${i} token ${t}`).toBeLessThan(1e-5);
        });
      }
    },
  );
});

/**
 * A rollout's samples handed out as a server's requests arrive: two first, the rest at the read after one of
 * those two has ended (by then the batch has dropped its row).
 */
class ArrivingQueue implements SampleQueue {
  private readonly waitingNow: QueuedSample[];
  private readonly later: QueuedSample[];
  private reads = 0;
  private firstEndedAtRead: number | null = null;

  constructor(
    private readonly batch: BatchQueue,
    first: readonly number[],
  ) {
    const all = batch.take(batch.waiting);
    this.waitingNow = first.map((i) => all[i]);
    this.later = all.filter((_, i) => !first.includes(i));
  }

  get waiting(): number {
    return this.waitingNow.length;
  }

  take(count: number): QueuedSample[] {
    return this.waitingNow.splice(0, count);
  }

  finished(sample: QueuedSample, logprobs: Float32Array): void {
    this.batch.finished(sample, logprobs);
    this.firstEndedAtRead ??= this.reads;
  }

  onRead(): void {
    this.reads++;
    if (this.firstEndedAtRead !== null && this.reads > this.firstEndedAtRead)
      this.waitingNow.push(...this.later.splice(0));
  }
}

/**
 * A rollout's samples as a server's requests arrive, recording after how many decode steps the loop took each and
 * ended each: the first waits from the start, the second arrives after step SECOND_ARRIVES, the rest after step
 * SECOND_ARRIVES + 2.
 */
class StepQueue implements SampleQueue {
  static readonly SECOND_ARRIVES = 4;
  readonly takenAt: number[] = [];
  readonly finishedAt: number[] = [];
  private readonly all: QueuedSample[];
  private readonly waitingNow: QueuedSample[];
  private steps = 0;

  constructor(readonly batch: BatchQueue) {
    this.all = batch.take(batch.waiting);
    this.waitingNow = this.all.slice(0, 1);
  }

  /** Called after each decode step: samples arrive. */
  step(steps: number): void {
    this.steps = steps;
    if (steps === StepQueue.SECOND_ARRIVES) this.waitingNow.push(this.all[1]);
    if (steps === StepQueue.SECOND_ARRIVES + 2) this.waitingNow.push(...this.all.slice(2));
  }

  get waiting(): number {
    return this.waitingNow.length;
  }

  take(count: number): QueuedSample[] {
    const taken = this.waitingNow.splice(0, count);
    for (const s of taken) this.takenAt[s.sampling.stream] = this.steps;
    return taken;
  }

  finished(sample: QueuedSample, logprobs: Float32Array): void {
    this.batch.finished(sample, logprobs);
    this.finishedAt[sample.sampling.stream] = this.steps;
  }
}

/** The response split into runs of generated tokens (turns) and of inserted tokens (observations). */
function segments(batch: RolloutBatch, i: number): { generated: boolean; start: number; tokens: number[] }[] {
  const out: { generated: boolean; start: number; tokens: number[] }[] = [];
  for (let t = 0; t < batch.responseLengths[i]; t++) {
    const generated = batch.responseMask[i][t] === 1;
    if (out.length === 0 || out[out.length - 1].generated !== generated) out.push({ generated, start: t, tokens: [] });
    out[out.length - 1].tokens.push(batch.responses[i][t]);
  }
  return out;
}

describe('multi-turn rollout', () => {
  const C: RolloutConfig = { ...BASE, n: 2, maxResponseLength: 24, eosTokenIds: [4], readEvery: 3 };

  it(
    'continues from the KV cache after each observation: greedy turns equal a full recompute of their ' + 'prefix',
    async () => {
      const engine = await gpuEngine();
      const policy = randomPolicy(engine, config('Qwen3ForCausalLM'), 5);
      const environment = new ScriptedEnvironment();
      const c: RolloutConfig = { ...C, ...VALIDATION_SAMPLING, n: 1 };
      const batch = await new RolloutGenerator(engine, policy).generate(PROMPTS, c, environment);
      const lm = new CausalLm(engine, policy.config, policy.params);
      let continued = 0;
      for (let i = 0; i < PROMPTS.length; i++) {
        const parts = segments(batch, i);
        for (const part of parts.filter((p) => p.generated)) {
          const prefix = [...PROMPTS[i], ...batch.responses[i].slice(0, part.start)];
          const turn = await generateWithoutCache(lm, [prefix], {
            ...c,
            maxResponseLength: part.tokens.length,
            eosTokenIds: [...c.eosTokenIds, ...environment.turnEndTokenIds],
          });
          expect(turn.responses[0], `sample ${i} turn at ${part.start}`).toEqual(part.tokens);
          if (part.start > 0) continued++;
        }
        // each observation follows a turn that ended on a turn-ending token, and is the scripted one
        parts.forEach((part, k) => {
          if (part.generated) return;
          expect(environment.turnEndTokenIds).toContain(parts[k - 1].tokens.at(-1));
          expect(part.tokens).toEqual(ScriptedEnvironment.observation(i, (k - 1) / 2));
        });
      }
      expect(continued).toBeGreaterThan(1);
    },
  );

  it(
    'masks observations out of response_mask, keeps them attended, and old log-probs equal teacher ' + 'forcing',
    async () => {
      const engine = await gpuEngine();
      const policy = randomPolicy(engine, config('LlamaForCausalLM'), 6);
      const environment = new ScriptedEnvironment();
      const batch = await new RolloutGenerator(engine, policy).generate(PROMPTS, C, environment);
      const P = batch.promptLength;
      let observed = 0;
      batch.responses.forEach((row, i) => {
        const length = batch.responseLengths[i];
        expect(batch.attentionMask[i].slice(P)).toEqual([
          ...new Array(length).fill(1),
          ...new Array(C.maxResponseLength - length).fill(0),
        ]);
        const prompt = PROMPTS[batch.groupIds[i]];
        expect(batch.positionIds[i].slice(P - prompt.length, P + length)).toEqual(
          Array.from({ length: prompt.length + length }, (_, t) => t),
        );
        for (let t = 0; t < length; t++) {
          if (batch.responseMask[i][t] === 0) {
            observed++;
            expect(batch.oldLogProbs[i][t]).toBe(0);
          }
        }
        expect(row.slice(length)).toEqual(new Array(C.maxResponseLength - length).fill(C.padTokenId));
      });
      expect(observed).toBeGreaterThan(4);
      // the environment saw every sample end its first turn, and the ended turns' tokens as generated
      expect(environment.calls[0].ended.map((e) => e.sample)).toEqual(batch.groupIds.map((_, i) => i));
      const reference = await teacherForced(engine, policy, batch, C.temperature);
      let compared = 0;
      batch.oldLogProbs.forEach((row, i) => {
        for (let t = 0; t < batch.responseLengths[i]; t++) {
          if (batch.responseMask[i][t] === 0) continue;
          expect(Math.abs(row[t] - reference[i * C.maxResponseLength + t]), `sample ${i} token ${t}`).toBeLessThan(
            1e-4,
          );
          compared++;
        }
      });
      expect(compared).toBeGreaterThan(20);
    },
  );

  it('samples in slot-sized chunks give the multi-turn rollout of one batch', async () => {
    const engine = await gpuEngine();
    const policy = randomPolicy(engine, config('LlamaForCausalLM'), 6);
    const generator = new RolloutGenerator(engine, policy);
    const one = await generator.generate(PROMPTS, C, new ScriptedEnvironment());
    const chunked = new ScriptedEnvironment();
    const two = await generator.generate(PROMPTS, { ...C, maxSlots: 4 }, chunked);
    // chunks of 4 and 2 samples, each from turn 0
    expect(chunked.calls.filter((call) => call.turn === 0).map((call) => call.ended.map((end) => end.sample))).toEqual([
      [0, 1, 2, 3],
      [4, 5],
    ]);
    expect(two.responses).toEqual(one.responses);
    expect(two.responseMask).toEqual(one.responseMask);
    two.oldLogProbs.forEach((row, i) => {
      for (let t = 0; t < row.length; t++) expect(Math.abs(row[t] - one.oldLogProbs[i][t])).toBeLessThan(1e-5);
    });
  });

  it('an environment of one turn gives exactly the single-turn rollout', async () => {
    const engine = await gpuEngine();
    const policy = randomPolicy(engine, config('LlamaForCausalLM'), 7);
    const generator = new RolloutGenerator(engine, policy);
    const single = await generator.generate(PROMPTS, C);
    const oneTurn = new ScriptedEnvironment();
    Object.assign(oneTurn, { maxTurns: 1 });
    const withEnvironment = await generator.generate(PROMPTS, C, {
      ...oneTurn,
      turnEndTokenIds: [],
      observe: oneTurn.observe.bind(oneTurn),
    });
    expect(withEnvironment.responses).toEqual(single.responses);
  });
});

/** A rollout's samples arriving as a server's requests would: sample k once `arrivals[k]` decode steps have run. */
class ScheduledQueue implements SampleQueue {
  readonly takenAt: number[] = [];
  private readonly all: QueuedSample[];
  private readonly waitingNow: QueuedSample[] = [];
  private steps = 0;

  constructor(
    readonly batch: BatchQueue,
    private readonly arrivals: readonly number[],
  ) {
    this.all = batch.take(batch.waiting);
    this.arrive();
  }

  /** Called after each decode step. */
  step(): void {
    this.steps++;
    this.arrive();
  }

  private arrive(): void {
    this.all.forEach((s, k) => {
      if (this.arrivals[k] === this.steps) this.waitingNow.push(s);
    });
  }

  get waiting(): number {
    return this.waitingNow.length;
  }

  take(count: number): QueuedSample[] {
    const taken = this.waitingNow.splice(0, count);
    for (const s of taken) this.takenAt[s.sampling.stream] = this.steps;
    return taken;
  }

  finished(sample: QueuedSample, logprobs: Float32Array): void {
    this.batch.finished(sample, logprobs);
  }
}
