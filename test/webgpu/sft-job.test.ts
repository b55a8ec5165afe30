// The SFT job at a tiny size on real files: a Qwen3-shaped checkpoint with its tokenizer, JSONL rows in verl's SFT
// shape, gradient accumulation over micro-batches, validation loss, HF checkpoints with the optimizer state, and a
// resumed run that continues exactly as the uninterrupted one.
import { describe, it, expect } from 'vitest';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gpuEngine } from '../support/gpu-engine.ts';
import { makeTinyRun } from '../support/tiny-run.ts';
import { parseSftOverrides } from '../../ppo/sft/sft-config.ts';
import { runSftJob } from '../../ppo/sft/sft-job-node.ts';
import { jobOverrides } from '../../ppo/run/job-cli-node.ts';
import { loadModel } from '../../models/model-files-node.ts';
import { arithmeticDataset } from '../../ppo/tasks/arithmetic.ts';

describe('SFT job', () => {
  it('trains, validates, saves HF checkpoints and resumes where it stopped', async () => {
    const engine = await gpuEngine();
    const { root } = await makeTinyRun(0);
    const { train, val } = arithmeticDataset({ digits: 1, trainSize: 32, valSize: 8, seed: 4 });
    const rows = (records: typeof train) => records.map((r) => JSON.stringify({ extra_info: { question: (r.row.prompt as { content: string }[])[0].content, answer: (r.row.reward_model as { ground_truth: string }).ground_truth } })).join('\n');
    await writeFile(join(root, 'sft-train.jsonl'), rows(train));
    await writeFile(join(root, 'sft-val.jsonl'), rows(val));
    // verl's GSM8K SFT example passes exactly these data keys.
    const launch = (dir: string, steps: number) => jobOverrides('sft', [
      'torchrun', '--standalone', '--nnodes=1', '--nproc_per_node=8', '-m', 'verl.trainer.fsdp_sft_trainer',
      `data.train_files=${join(root, 'sft-train.jsonl')}`, `data.val_files=${join(root, 'sft-val.jsonl')}`,
      'data.prompt_key=extra_info', 'data.response_key=extra_info', "data.prompt_dict_keys=['question']", "+data.response_dict_keys=['answer']",
      'data.train_batch_size=8', 'data.micro_batch_size_per_gpu=4', 'data.max_length=16', `model.partial_pretrain=${join(root, 'model')}`,
      'optim.lr=3e-3', 'optim.lr_scheduler=constant', 'optim.warmup_steps_ratio=0', `trainer.default_local_dir=${join(root, dir)}`,
      `trainer.total_training_steps=${steps}`, 'trainer.save_freq=2', 'trainer.test_freq=2', 'trainer.logger=[console,file]', 'trainer.n_gpus_per_node=8',
    ]);
    const run = (dir: string, steps: number) => {
      const { config, notes } = parseSftOverrides(launch(dir, steps));
      expect(notes).toEqual([expect.stringMatching(/trainer.n_gpus_per_node is ignored/)]);
      return runSftJob(engine, config, () => {});
    };

    const straight = await run('straight', 6);
    expect(straight.steps).toBe(6);
    expect(straight.valAfter!['val/loss']).toBeLessThan(straight.valBefore!['val/loss']);
    const saved = await loadModel(engine, straight.checkpoint!);
    expect(saved.config.architecture).toBe('Qwen3ForCausalLM');
    expect(JSON.parse(await readFile(join(straight.checkpoint!, 'config.json'), 'utf8')).torch_dtype).toBe('float32');
    const metrics = (await readFile(join(root, 'straight', 'metrics.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l));
    expect(metrics.filter((m) => 'val/loss' in m.data).map((m) => m.step)).toEqual([0, 2, 4, 6]);

    const first = await run('resumed', 4);
    const rest = await run('resumed', 6);
    expect(rest.steps).toBe(6);
    const losses = (result: typeof straight) => result.history.map((m) => m['train/loss']);
    expect([...losses(first), ...losses(rest)]).toEqual(losses(straight));
    expect(rest.valAfter).toEqual(straight.valAfter);
  });
});
