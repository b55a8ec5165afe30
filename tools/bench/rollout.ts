// `node tools/bench.js rollout`: generated tokens/s of a rollout — 8 prompts of 16 tokens, 112 new tokens each,
// sampled at temperature 1 with no early stop — for the tiny and small benchmark configs, with the KV cache and
// with the no-cache path (full recompute every step) in the same run. A warm-up run of each (pipeline
// compilation, allocation) is excluded; the median of the timed runs is reported.
import type { Engine } from '../../engine/index.ts';
import { BENCH_TINY, BENCH_SMALL } from '../../models/presets.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { initialParameters } from '../../models/init.ts';
import { seededRandom } from '../../engine/rng.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { RolloutGenerator } from '../../ppo/phases/rollout.ts';
import type { RolloutBatch, RolloutConfig } from '../../ppo/generation/types.ts';
import { generateWithoutCache } from './rollout-without-cache.ts';
import { median } from './harness.ts';

export interface RolloutBenchRow {
  config: 'tiny' | 'small';
  mode: 'kv-cache' | 'no-cache';
  batch: number;
  prompt_len: number;
  new_tokens: number;
  ms: number;
  tokens_per_s: number;
}

const BATCH = 8;
const PROMPT_LENGTH = 16;
const NEW_TOKENS = 112;

export async function benchmarkRollout(
  engine: Engine,
  options: { runs?: number; configs?: RolloutBenchRow['config'][]; modes?: RolloutBenchRow['mode'][] } = {},
): Promise<RolloutBenchRow[]> {
  const runs = options.runs ?? 3;
  const rows: RolloutBenchRow[] = [];
  const configs = options.configs ?? ['tiny', 'small'];
  const wanted = options.modes ?? ['kv-cache', 'no-cache'];
  for (const [name, config] of (
    [
      ['tiny', BENCH_TINY],
      ['small', BENCH_SMALL],
    ] as const
  ).filter(([n]) => configs.includes(n))) {
    const params = createParameterArena(engine, config, `bench-rollout-${name}`);
    uploadArenaTensors(engine, params, initialParameters(config, 1));
    const policy = { config, params };
    const random = seededRandom(7);
    const prompts = Array.from({ length: BATCH }, () =>
      Array.from({ length: PROMPT_LENGTH }, () => Math.floor(random() * config.vocabSize)),
    );
    const rollout: RolloutConfig = {
      n: 1,
      temperature: 1,
      topK: -1,
      topP: 1,
      seed: 1,
      maxResponseLength: NEW_TOKENS,
      eosTokenIds: [],
      padTokenId: 0,
    };
    const generator = new RolloutGenerator(engine, policy);
    const lm = new CausalLm(engine, config, params);
    // The no-cache path costs minutes per run on a CPU: it is timed once, after a shorter warm-up that still
    // reaches every attention block size (queries up to 64) its full run compiles.
    const modes: [RolloutBenchRow['mode'], (length: number) => Promise<RolloutBatch>, number, number][] = [
      [
        'kv-cache',
        (length) => generator.generate(prompts, { ...rollout, maxResponseLength: length }),
        NEW_TOKENS,
        runs,
      ],
      [
        'no-cache',
        (length) => generateWithoutCache(lm, prompts, { ...rollout, maxResponseLength: length }),
        64 - PROMPT_LENGTH + 1,
        1,
      ],
    ];
    for (const [mode, generate, warmupLength, timedRuns] of modes.filter(([m]) => wanted.includes(m))) {
      await generate(warmupLength);
      const times: number[] = [];
      for (let r = 0; r < timedRuns; r++) {
        const start = performance.now();
        const batch = await generate(NEW_TOKENS);
        times.push(performance.now() - start);
        const generated = batch.responseLengths.reduce((s, n) => s + n, 0);
        if (generated !== BATCH * NEW_TOKENS)
          throw new Error(`rollout bench: ${generated} tokens generated, expected ${BATCH * NEW_TOKENS}`);
      }
      const ms = median(times);
      rows.push({
        config: name,
        mode,
        batch: BATCH,
        prompt_len: PROMPT_LENGTH,
        new_tokens: NEW_TOKENS,
        ms,
        tokens_per_s: (BATCH * NEW_TOKENS) / (ms / 1000),
      });
    }
    generator.release();
    for (const buffer of params.buffers) engine.destroyTensor(buffer);
  }
  return rows;
}
