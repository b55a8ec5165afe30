// The three RLHF stages chained at a tiny size, each stage's output directory the next one's input as a user chains
// them: the SFT job on a base model, the reward-model job on the SFT checkpoint, then PPO (node train.js) with the SFT
// checkpoint as actor, the learned reward model as reward_model.model.path and as critic.model.path. PPO's rewards are
// shown to be the learned model's scores: each dumped rollout sample's score equals the reward model's score of that
// prompt and response computed here directly, and none is the task's 0/1 rule.
import { describe, it, expect } from 'vitest';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gpuEngine } from '../support/gpu-engine.ts';
import { makeTinyRun } from '../support/tiny-run.ts';
import { runCli } from '../support/run-cli.ts';
import { jobOverrides } from '../../ppo/jobs/supervised-command-node.ts';
import { parseSftOverrides } from '../../ppo/sft/sft-config.ts';
import { runSftJob } from '../../ppo/jobs/sft-job-node.ts';
import { parseRewardOverrides } from '../../ppo/reward-model/reward-config.ts';
import { runRewardJob } from '../../ppo/jobs/reward-model-job-node.ts';
import { arithmeticDataset, arithmeticTokenizer } from '../../ppo/tasks/arithmetic.ts';
import { loadModel } from '../../models/model-files-node.ts';
import { ValueModel } from '../../models/value-model.ts';
import { uploadTokenBatch } from '../../models/token-batch.ts';
import type { GenerationRecord } from '../../ppo/loggers/generation-records.ts';

describe('SFT → reward model → PPO', () => {
  it("each stage reads the previous stage's checkpoint", async () => {
    const engine = await gpuEngine();
    const tiny = await makeTinyRun(6);
    const { root } = tiny;
    const problems = arithmeticDataset({ digits: 1, trainSize: 16, valSize: 0, seed: 5 }).train.map((r) => ({
      question: (r.row.prompt as { content: string }[])[0].content,
      sum: String((r.row.reward_model as { ground_truth: string }).ground_truth),
    }));
    await writeFile(
      join(root, 'sft.jsonl'),
      problems.map((p) => JSON.stringify({ question: p.question, answer: p.sum })).join('\n'),
    );
    // TRL's conversational shape with a shared prompt: the bare sum is preferred to the sloppy one.
    await writeFile(
      join(root, 'pairs.jsonl'),
      problems
        .map((p) =>
          JSON.stringify({
            prompt: [{ role: 'user', content: p.question }],
            chosen: [{ role: 'assistant', content: p.sum }],
            rejected: [{ role: 'assistant', content: `${p.sum} ` }],
          }),
        )
        .join('\n'),
    );
    const common = [
      'data.train_batch_size=4',
      'data.micro_batch_size_per_gpu=2',
      'trainer.total_training_steps=2',
      'trainer.logger=[file]',
      'optim.lr=1e-3',
    ];

    const sft = await runSftJob(
      engine,
      parseSftOverrides(
        jobOverrides('sft', [
          `data.train_files=${join(root, 'sft.jsonl')}`,
          'data.prompt_dict_keys=null',
          'data.response_dict_keys=null',
          `model.partial_pretrain=${join(root, 'model')}`,
          `trainer.default_local_dir=${join(root, 'sft')}`,
          ...common,
        ]),
      ).config,
      () => {},
    );
    expect(sft.checkpoint).toBe(join(root, 'sft', 'global_step_2'));

    const rm = await runRewardJob(
      engine,
      parseRewardOverrides(
        jobOverrides('reward-model', [
          `data.train_files=${join(root, 'pairs.jsonl')}`,
          `model.partial_pretrain=${sft.checkpoint}`,
          `trainer.default_local_dir=${join(root, 'rm')}`,
          ...common,
        ]),
      ).config,
      () => {},
    );
    expect(JSON.parse(await readFile(join(rm.checkpoint!, 'config.json'), 'utf8')).architectures).toEqual([
      'Qwen3ForSequenceClassification',
    ]);
    expect(rm.history.map((m) => m['train/accuracy'])).toHaveLength(2);

    const ppoDir = join(root, 'ppo');
    const dumps = join(root, 'rollouts');
    // One-token responses: a dumped response's text (special tokens decoded away) then names its token exactly.
    const run = await runCli([
      ...tiny.overrides.filter((o) => !o.startsWith('actor_rollout_ref.model.path=')),
      `actor_rollout_ref.model.path=${sft.checkpoint}`,
      'reward_model.enable=true',
      `reward_model.model.path=${rm.checkpoint}`,
      `critic.model.path=${rm.checkpoint}`,
      'data.max_response_length=1',
      'actor_rollout_ref.rollout.n=2',
      `trainer.rollout_data_dir=${dumps}`,
      'trainer.total_training_steps=1',
      `trainer.default_local_dir=${ppoDir}`,
    ]);
    expect(run.stderr).not.toMatch(/error/i);
    expect(run.code).toBe(0);
    const metrics = (await readFile(join(ppoDir, 'metrics.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(metrics.at(-1).step).toBe(1);
    const samples: GenerationRecord[] = (await readFile(join(dumps, '1.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(samples).toHaveLength(8);
    expect(samples.every((s) => s.score !== 0 && s.score !== 1)).toBe(true);
    expect(metrics.at(-1).data['critic/score/mean']).toBeCloseTo(
      samples.reduce((sum, s) => sum + s.score, 0) / samples.length,
      5,
    );

    const scored = samples.filter((s) => s.output !== '');
    expect(scored.length).toBeGreaterThanOrEqual(4);
    const { config, params } = await loadModel(engine, rm.checkpoint!);
    const rewardModel = new ValueModel(engine, config, params);
    const inputIds = scored.map((s) => arithmeticTokenizer.encode(`<|user|>${s.input}<|assistant|>${s.output}`));
    const attentionMask = inputIds.map((ids) => ids.map(() => 1));
    const direct = await rewardModel.sequenceScores(
      uploadTokenBatch(engine, { inputIds, attentionMask }, config.vocabSize),
      attentionMask,
    );
    scored.forEach((s, i) => expect(s.score).toBeCloseTo(direct[i], 3));
  });
});
