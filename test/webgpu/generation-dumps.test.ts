// trainer.rollout_data_dir and trainer.validation_data_dir on the tiny run: verl's _dump_generations files, one
// {step}.jsonl per training step and per validation, checked against the run's own metrics and data rows.
import { describe, it, expect } from 'vitest';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';
import { runCli } from '../support/run-cli.ts';

const readJsonl = async (file: string) =>
  (await readFile(file, 'utf8'))
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line));
const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;

describe('generation dumps', () => {
  it(
    "write verl's JSONL per step and per validation: input, output, gts, score, step and the reward's extra " +
      'fields',
    async () => {
      const { root, overrides } = await makeTinyRun(4);
      const data = overrides.find((o) => o.startsWith('data.train_files='))!.split('=')[1];
      const rows = await readJsonl(data);
      const reward = fileURLToPath(new URL('../support/data/custom-reward.ts', import.meta.url));
      const dir = join(root, 'run');
      const rolloutDir = join(root, 'rollouts');
      const validationDir = join(root, 'validations');
      const { code, stderr } = await runCli([
        ...overrides,
        `data.val_files=${data}`,
        'trainer.total_training_steps=2',
        'trainer.test_freq=2',
        'trainer.val_before_train=true',
        `custom_reward_function.path=${reward}`,
        `trainer.default_local_dir=${dir}`,
        `trainer.rollout_data_dir=${rolloutDir}`,
        `trainer.validation_data_dir=${validationDir}`,
      ]);
      expect(code, stderr).toBe(0);
      expect((await readdir(rolloutDir)).sort()).toEqual(['1.jsonl', '2.jsonl']);
      expect((await readdir(validationDir)).sort()).toEqual(['0.jsonl', '2.jsonl']);
      const metrics = await runMetrics(dir);
      const prompts = new Set(rows.map((r) => r.prompt[0].content));
      const answers = new Set(rows.map((r) => r.reward_model.ground_truth));

      for (const step of [1, 2]) {
        const lines = await readJsonl(join(rolloutDir, `${step}.jsonl`));
        expect(lines).toHaveLength(4);
        for (const line of lines) {
          // verl's columns, then the reward dict's entries (its score replaces the score, as in verl).
          expect(Object.keys(line)).toEqual(['input', 'output', 'gts', 'score', 'step', 'correct', 'source']);
          expect(line.step).toBe(step);
          expect([...prompts].some((p) => line.input.includes(p))).toBe(true);
          expect(answers.has(line.gts)).toBe(true);
          expect(line.correct).toBe(line.output.trim() === line.gts);
          expect(line.source).toBe('arithmetic');
        }
        const logged = metrics.find((m) => m.step === step && 'critic/score/mean' in m.data)!.data;
        expect(mean(lines.map((l) => l.score))).toBeCloseTo(logged['critic/score/mean'], 6);
      }
      for (const step of [0, 2]) {
        const lines = await readJsonl(join(validationDir, `${step}.jsonl`));
        expect(lines).toHaveLength(4);
        // verl's _validate puts `reward` (the score) first among the extra fields.
        for (const line of lines)
          expect(Object.keys(line)).toEqual(['input', 'output', 'gts', 'score', 'step', 'reward', 'correct', 'source']);
        expect(lines.every((l) => l.step === step && l.reward === l.score)).toBe(true);
        const logged = metrics.find((m) => m.step === step && 'val/test_score/mean' in m.data)!.data;
        expect(mean(lines.map((l) => l.score))).toBeCloseTo(logged['val/test_score/mean'], 6);
      }
    },
  );
});
