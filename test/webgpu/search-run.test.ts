// A Search-R1 run through `node train.js`'s entry point on a tiny model: the search task's rows and corpus as
// files, the built-in BM25 over retriever.corpus_path, multi-turn rollouts in training and validation, and
// Search-R1's env/* metrics in metrics.jsonl.
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { main } from '../../ppo/jobs/ppo-job-node.ts';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';

describe('search run', () => {
  it('do_search with BM25 over a corpus file: multi-turn steps and validation report env metrics', async () => {
    const { root, overrides } = await makeTinyRun(8, 'search_qa');
    const dir = join(root, 'search');
    const data = overrides.find((o) => o.startsWith('data.train_files='))!.split('=')[1];
    expect(
      await main([
        ...overrides,
        'do_search=true',
        `retriever.corpus_path=${join(root, 'corpus.jsonl')}`,
        'retriever.topk=2',
        'max_turns=2',
        'data.max_response_length=20',
        'data.max_obs_length=8',
        `data.val_files=${data}`,
        'trainer.val_before_train=true',
        'actor_rollout_ref.rollout.temperature=1.5',
        'trainer.total_training_steps=2',
        `trainer.default_local_dir=${dir}`,
      ]),
    ).toBe(0);
    const lines = (await runMetrics(dir)).map((l) => l.data);
    const steps = lines.filter((m) => m['critic/score/mean'] !== undefined);
    expect(steps).toHaveLength(2);
    for (const m of steps) {
      expect(m['env/number_of_actions/mean']).toBeGreaterThanOrEqual(1);
      expect(m['env/number_of_actions/max']).toBeLessThanOrEqual(3);
      expect(m['env/number_of_actions/min']).toBeLessThanOrEqual(m['env/number_of_actions/mean']);
      expect(m['env/number_of_actions/mean']).toBeLessThanOrEqual(m['env/number_of_actions/max']);
      expect(m['env/number_of_valid_action']).toBeLessThanOrEqual(m['env/number_of_actions/mean']);
      // verl's num_turns: the prompt, each turn and each observation between turns.
      expect(m['num_turns/mean']).toBeGreaterThanOrEqual(1 + m['env/number_of_actions/mean']);
      expect(m['num_turns/max']).toBeLessThanOrEqual(1 + 2 * m['env/number_of_actions/max']);
      // Every step's samples got observations (search results or the invalid-action correction).
      expect(m['env/observation_token_share']).toBeGreaterThan(0);
      for (const key of ['env/ratio_of_valid_action', 'env/finish_ratio', 'env/observation_token_share']) {
        expect(m[key], key).toBeGreaterThanOrEqual(0);
        expect(m[key], key).toBeLessThanOrEqual(1);
      }
    }
    // Multi-turn for real: some sample went on after an observation, and some search was valid, so BM25 answered it.
    expect(Math.max(...steps.map((m) => m['env/number_of_actions/max']))).toBe(2);
    expect(Math.max(...steps.map((m) => m['env/number_of_valid_search']))).toBeGreaterThan(0);
    const validations = lines.filter((m) => m['val/test_score/mean'] !== undefined);
    expect(validations.length).toBeGreaterThanOrEqual(1);
    expect(validations[0]['val/env/number_of_actions/mean']).toBeGreaterThanOrEqual(1);
    expect(validations[0]['val-aux/num_turns/min']).toBeGreaterThanOrEqual(2);
    expect(validations[0]['val-aux/num_turns/mean']).toBeLessThanOrEqual(validations[0]['val-aux/num_turns/max']);
  }, 300_000);
});
