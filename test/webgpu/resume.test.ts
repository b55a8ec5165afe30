// A run killed after step 2 and resumed continues bit-identically to an uninterrupted run, across epoch
// boundaries (6 prompts, batches of 4: every step starts a new epoch) and with a reference model (KL in reward).
import { describe, it, expect } from 'vitest';
import { mkdtemp, readFile, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine } from '../../engine/index.ts';
import { tinyQwen3Config } from '../../models/presets.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { initialParameters } from '../../models/init.ts';
import { saveModel } from '../../models/model-files-node.ts';
import { arithmeticTokenizer, arithmeticTokenizerFiles, arithmeticDataset } from '../../ppo/tasks/arithmetic.ts';
import { main } from '../../ppo/cli-node.ts';

async function makeModelDir(root: string): Promise<string> {
  const engine = await Engine.create();
  try {
    const config = tinyQwen3Config(arithmeticTokenizer.vocabSize, { layers: 1, hidden: 32, heads: 2, kvHeads: 1, headDim: 16, intermediate: 64 });
    const params = createParameterArena(engine, config, 'actor');
    uploadArenaTensors(engine, params, initialParameters(config, 5));
    const dir = join(root, 'model');
    await saveModel(engine, dir, config, params);
    const { tokenizerJson, tokenizerConfig } = arithmeticTokenizerFiles();
    await writeFile(join(dir, 'tokenizer.json'), JSON.stringify(tokenizerJson));
    await writeFile(join(dir, 'tokenizer_config.json'), JSON.stringify(tokenizerConfig));
    return dir;
  } finally {
    engine.destroy();
  }
}

function withoutTimings(line: string): Record<string, number> {
  const metrics = JSON.parse(line) as Record<string, number>;
  for (const key of Object.keys(metrics)) if (key.startsWith('timing_s/') || key.startsWith('perf/')) delete metrics[key];
  return metrics;
}

describe('resume', () => {
  it('continues bit-identically after a restart across epoch boundaries', async () => {
    const root = await mkdtemp(join(tmpdir(), 'resume-'));
    const model = await makeModelDir(root);
    const { train } = arithmeticDataset({ digits: 1, trainSize: 6, valSize: 0, seed: 3 });
    const data = join(root, 'train.jsonl');
    await mkdir(root, { recursive: true });
    await writeFile(data, train.map((r) => JSON.stringify(r.row)).join('\n') + '\n');
    const common = [
      `actor_rollout_ref.model.path=${model}`, `data.train_files=${data}`, 'data.train_batch_size=4', 'data.max_prompt_length=16',
      'data.max_response_length=3', 'actor_rollout_ref.actor.ppo_mini_batch_size=2', 'actor_rollout_ref.actor.optim.lr=1e-2',
      'critic.optim.lr=1e-2', 'algorithm.use_kl_in_reward=true', 'algorithm.kl_ctrl.type=adaptive', 'actor_rollout_ref.actor.shuffle=true',
      'trainer.val_before_train=false', 'trainer.test_freq=-1', 'trainer.save_freq=1', 'trainer.logger=[file]',
    ];
    const a = join(root, 'a');
    const b = join(root, 'b');
    expect(await main([...common, `trainer.default_local_dir=${a}`, 'trainer.total_training_steps=3'])).toBe(0);
    expect(await main([...common, `trainer.default_local_dir=${b}`, 'trainer.total_training_steps=2'])).toBe(0);
    expect(await main([...common, `trainer.default_local_dir=${b}`, 'trainer.total_training_steps=3'])).toBe(0);

    const metrics = async (dir: string) => (await readFile(join(dir, 'metrics.jsonl'), 'utf8')).trim().split('\n').map(withoutTimings);
    const stepLines = (lines: Record<string, number>[]) => lines.filter((m) => m['critic/score/mean'] !== undefined);
    expect(stepLines(await metrics(b))).toEqual(stepLines(await metrics(a)));
    for (const file of ['actor/model.safetensors', 'critic/model.safetensors', 'actor/optimizer.safetensors', 'critic/optimizer.safetensors']) {
      const fromA = await readFile(join(a, 'global_step_3', file));
      const fromB = await readFile(join(b, 'global_step_3', file));
      expect(Buffer.compare(fromA, fromB), file).toBe(0);
    }
  }, 600_000);
});
