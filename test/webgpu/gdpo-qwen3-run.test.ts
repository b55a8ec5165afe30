// GDPO end to end at a real model's interfaces: a Qwen3-shaped checkpoint (1 layer of hidden 128, Qwen3's
// 151,936-token vocabulary, bf16 safetensors and the real Qwen3 tokenizer and chat template), verl-schema parquet
// and a custom reward returning a dict of two keys on different scales, trained two steps with
// algorithm.adv_estimator=gdpo. Outside truth for the advantages: the rollout dump (trainer.rollout_data_dir) holds
// each response's two key values; GRPO per key within its group (n consecutive rows), summed, then whitened over the
// response tokens gives the run's critic/advantages/{max,min} (every response runs to max_response_length: a random
// model over 151,936 tokens almost never samples EOS, and the test checks the lengths, so the whitening weighs each
// response alike). GRPO on the plain sum gives other extremes, so the check tells per-key normalisation apart (on
// lavapipe: step 1's max/min 1.27693/-1.39287, the per-key reference's within 3e-7, the sum's 1.32901/-1.35532;
// the test takes about 6 s).
import { describe, it, expect } from 'vitest';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeQwen3Model, QWEN3_TINY_LAYER } from '../../tools/qwen3-model.ts';
import { rowsToParquet } from '../../tools/parquet/jsonl-to-parquet.ts';
import { arithmeticDataset } from '../../ppo/tasks/arithmetic.ts';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';
import { runCli } from '../support/run-cli.ts';
import { makeTempDir } from '../support/temp-dir.ts';

const N = 4;
const T = 4;
const KEYS = ['length_reward', 'vowel_reward'] as const;

const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;
const unbiasedStd = (v: number[]) => Math.sqrt(v.reduce((a, x) => a + (x - mean(v)) ** 2, 0) / (v.length - 1));

/** verl's GRPO scores (group mean and unbiased std, ε 1e-6) per response, groups of N consecutive rows. */
function grpo(scores: number[]): number[] {
  return scores.map((s, i) => {
    const group = scores.slice(i - (i % N), i - (i % N) + N);
    return (s - mean(group)) / (unbiasedStd(group) + 1e-6);
  });
}

/** masked_whiten over B·T tokens when every response has T of them: its extremes. */
function whitenedExtremes(perResponse: number[]): { max: number; min: number } {
  const tokens = perResponse.flatMap((v) => Array<number>(T).fill(v));
  const m = mean(tokens);
  const std = unbiasedStd(tokens);
  return { max: (Math.max(...perResponse) - m) / (std + 1e-8), min: (Math.min(...perResponse) - m) / (std + 1e-8) };
}

describe('GDPO on a Qwen3-shaped checkpoint', () => {
  it('trains two steps from verl-schema parquet with a two-key dict reward: gdpo/<key>/* and per-key advantages', async () => {
    const root = await makeTempDir('gdpo-qwen3-');
    const model = join(root, 'qwen3');
    await writeQwen3Model(model, { ...QWEN3_TINY_LAYER, layers: 1 });
    const train = join(root, 'train.parquet');
    await writeFile(
      train,
      Buffer.from(rowsToParquet(arithmeticDataset({ digits: 1, trainSize: 4, valSize: 0, seed: 3 }).train)),
    );
    const reward = join(root, 'two-keys.mjs');
    await writeFile(
      reward,
      'export function compute_score(dataSource, solution) {\n' +
        '  const length_reward = solution.length / 10;\n' +
        '  const vowel_reward = (solution.match(/[aeiou]/gi) ?? []).length;\n' +
        '  return { score: length_reward + vowel_reward, length_reward, vowel_reward };\n}\n',
    );
    const { overrides } = await makeTinyRun(0);
    const dir = join(root, 'run');
    const dumps = join(root, 'dumps');
    const { code, stderr } = await runCli([
      ...overrides.filter((o) => !o.startsWith('data.')),
      `actor_rollout_ref.model.path=${model}`,
      `data.train_files=${train}`,
      'data.train_batch_size=2',
      'data.max_prompt_length=64',
      `data.max_response_length=${T}`,
      `custom_reward_function.path=${reward}`,
      'reward_model.reward_manager=gdpo',
      'algorithm.adv_estimator=gdpo',
      `algorithm.gdpo_reward_keys=[${KEYS.join(',')}]`,
      `actor_rollout_ref.rollout.n=${N}`,
      'trainer.total_training_steps=2',
      `trainer.default_local_dir=${dir}`,
      `trainer.rollout_data_dir=${dumps}`,
    ]);
    expect(code, stderr).toBe(0);
    const steps = (await runMetrics(dir)).filter((l) => l.data['critic/score/mean'] !== undefined);
    expect(steps.map((s) => s.step)).toEqual([1, 2]);
    for (const { step, data } of steps) {
      for (const [key, value] of Object.entries(data)) expect(Number.isFinite(value), `${key} = ${value}`).toBe(true);
      const rows = (await readFile(join(dumps, `${step}.jsonl`), 'utf8'))
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      expect(rows).toHaveLength(2 * N);
      expect(data['response_length/min'], 'every response runs to max_response_length').toBe(T);
      for (let g = 0; g < rows.length; g += N) expect(new Set(rows.slice(g, g + N).map((r) => r.input)).size).toBe(1);
      const values = KEYS.map((key) => rows.map((r) => r[key] as number));
      KEYS.forEach((key, k) => {
        const v = values[k];
        expect(data[`gdpo/${key}/mean`], key).toBeCloseTo(mean(v), 5);
        expect(data[`gdpo/${key}/max`], key).toBeCloseTo(Math.max(...v), 5);
        expect(data[`gdpo/${key}/min`], key).toBeCloseTo(Math.min(...v), 5);
        expect(data[`gdpo/${key}/std`], key).toBeCloseTo(unbiasedStd(v) * Math.sqrt((v.length - 1) / v.length), 5);
      });
      const perKey = whitenedExtremes(grpo(values[0]).map((a, b) => a + grpo(values[1])[b]));
      const onSum = whitenedExtremes(grpo(values[0].map((v, b) => v + values[1][b])));
      expect(Math.abs(perKey.max - onSum.max) + Math.abs(perKey.min - onSum.min)).toBeGreaterThan(0.05);
      expect(data['critic/advantages/max']).toBeCloseTo(perKey.max, 5);
      expect(data['critic/advantages/min']).toBeCloseTo(perKey.min, 5);
      expect(Math.abs(data['critic/advantages/mean'])).toBeLessThan(1e-5);
    }
  });
});
