// A tiny real run for trainer tests: a fresh 1-layer Qwen3-style model saved as a Hugging Face directory with a
// built-in task's tokenizer, and a JSONL training file in verl's schema (for the search task, also its corpus).
import { readFile, writeFile } from 'node:fs/promises';
import { vi } from 'vitest';
import { join } from 'node:path';
import { Engine } from '../../engine/index.ts';
import { tinyQwen3Config } from '../../models/presets.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { initialParameters } from '../../models/init.ts';
import { saveModel } from '../../models/model-files-node.ts';
import { arithmeticTokenizer, arithmeticTokenizerFiles, arithmeticDataset } from '../../ppo/tasks/arithmetic.ts';
import { jobOverrides } from '../../ppo/jobs/supervised-command-node.ts';
import {
  corpusJsonl,
  syntheticQaDataset,
  syntheticQaTokenizer,
  syntheticQaTokenizerFiles,
} from '../../ppo/tasks/synthetic-qa.ts';
import { makeTempDir } from './temp-dir.ts';
import { main } from '../../ppo/jobs/ppo-job-node.ts';

export interface TinyRun {
  root: string;
  /**
   * Overrides that point a run at the tiny model and data, with small batches and file-only logging; no validation, and
   *  a save_freq above any tiny run's length, so (verl: a save at the last step whenever save_freq > 0) only the last
   *  step is saved. */
  overrides: string[];
}

/** The task's tokenizer files, training rows and (search task) corpus. */
function taskData(task: 'arithmetic' | 'search_qa', trainSize: number) {
  if (task === 'arithmetic') {
    return {
      vocabSize: arithmeticTokenizer.vocabSize,
      files: arithmeticTokenizerFiles(),
      train: arithmeticDataset({ digits: 1, trainSize, valSize: 0, seed: 3 }).train,
      corpus: null,
    };
  }
  const { train, corpus } = syntheticQaDataset({ seed: 3, valSize: 0 });
  return {
    vocabSize: syntheticQaTokenizer.vocabSize,
    files: syntheticQaTokenizerFiles(),
    train: train.slice(0, trainSize),
    corpus,
  };
}

/** A fresh Qwen3-style model (1 layer unless `shape` says otherwise, weights seeded by `seed`, drawn with standard
 *  deviation `initializerRange`) saved as a Hugging Face directory with the task's tokenizer. */
export async function saveTinyModel(
  dir: string,
  task: 'arithmetic' | 'search_qa',
  seed: number,
  shape: Partial<Parameters<typeof tinyQwen3Config>[1]> = {},
  initializerRange = 0.02,
  /** Changes the drawn weights (by Hugging Face name) before they are saved. */
  edit: (values: Map<string, Float32Array>) => void = () => {},
): Promise<void> {
  const { vocabSize, files } = taskData(task, 0);
  const engine = await Engine.create();
  try {
    const config = tinyQwen3Config(vocabSize, {
      layers: 1,
      hidden: 32,
      heads: 2,
      kvHeads: 1,
      headDim: 16,
      intermediate: 64,
      ...shape,
    });
    const params = createParameterArena(engine, config, 'actor');
    const values = initialParameters(config, seed, initializerRange);
    edit(values);
    uploadArenaTensors(engine, params, values);
    await saveModel(engine, dir, config, params);
  } finally {
    engine.destroy();
  }
  await writeFile(join(dir, 'tokenizer.json'), JSON.stringify(files.tokenizerJson));
  await writeFile(join(dir, 'tokenizer_config.json'), JSON.stringify(files.tokenizerConfig));
}

export async function makeTinyRun(trainSize = 6, task: 'arithmetic' | 'search_qa' = 'arithmetic'): Promise<TinyRun> {
  const root = await makeTempDir('tiny-run-');
  const model = join(root, 'model');
  const { train, corpus } = taskData(task, trainSize);
  await saveTinyModel(model, task, 5);
  const data = join(root, 'train.jsonl');
  await writeFile(data, `${train.map((r) => JSON.stringify(r.row)).join('\n')}\n`);
  if (corpus) await writeFile(join(root, 'corpus.jsonl'), corpusJsonl(corpus));
  return {
    root,
    overrides: [
      `actor_rollout_ref.model.path=${model}`,
      `data.train_files=${data}`,
      'data.train_batch_size=4',
      'data.max_prompt_length=16',
      'data.max_response_length=3',
      'actor_rollout_ref.actor.ppo_mini_batch_size=2',
      'actor_rollout_ref.actor.optim.lr=1e-2',
      'critic.optim.lr=1e-2',
      'trainer.val_before_train=false',
      'trainer.test_freq=-1',
      'trainer.save_freq=1000',
      'trainer.logger=[file]',
    ],
  };
}

/** The metrics a run's file logger wrote, one record per line (verl's shape: {"step": N, "data": {...}}). */
export async function runMetrics(runDir: string): Promise<{ step: number; data: Record<string, number> }[]> {
  return (await readFile(join(runDir, 'metrics.jsonl'), 'utf8'))
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line));
}

/**
 * One GRPO step of `run` through train.js's `main` on a device that binds at most `binding` bytes
 * (WEBGPU_MAX_BINDING_BYTES, stubbed: the caller's afterEach unstubs it): rollout.n 2, a mini-batch of 4, `micro`
 * sequences in every micro-batch, the KL loss on; `extra` keys last. Expects exit code 0 and finite losses; gives
 * the step's metrics.
 */
export async function grpoStepUnderBinding(run: TinyRun, binding: number, micro: number, extra: string[] = []) {
  vi.stubEnv('WEBGPU_MAX_BINDING_BYTES', String(binding));
  const dir = join(run.root, 'run');
  const code = await main([
    ...run.overrides,
    'algorithm.adv_estimator=grpo',
    'actor_rollout_ref.rollout.n=2',
    'actor_rollout_ref.actor.ppo_mini_batch_size=4',
    `actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=${micro}`,
    `actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=${micro}`,
    `actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=${micro}`,
    'actor_rollout_ref.actor.use_kl_loss=true',
    `trainer.default_local_dir=${dir}`,
    'trainer.total_training_steps=1',
    ...extra,
  ]);
  if (code !== 0) throw new Error(`train.js under a ${binding}-byte binding exited with ${code}`);
  const [step] = (await runMetrics(dir)).filter((m) => m.data['actor/pg_loss'] !== undefined);
  for (const key of ['actor/pg_loss', 'actor/kl_loss', 'actor/grad_norm'])
    if (!Number.isFinite(step.data[key])) throw new Error(`${key} is ${step.data[key]}`);
  return step.data;
}

/**
 * A tiny model with verl-shaped SFT rows, and the launch of verl's GSM8K SFT example on them: `launch(dir, steps)` is
 * its key=value arguments (the torchrun prefix dropped), run in `<root>/<dir>`; later `extra` keys win.
 */
export async function makeTinySftRun() {
  const { root } = await makeTinyRun(0);
  const { train, val } = arithmeticDataset({ digits: 1, trainSize: 32, valSize: 8, seed: 4 });
  const rows = (records: typeof train) =>
    records
      .map((r) =>
        JSON.stringify({
          extra_info: {
            question: (r.row.prompt as { content: string }[])[0].content,
            answer: (r.row.reward_model as { ground_truth: string }).ground_truth,
          },
        }),
      )
      .join('\n');
  await writeFile(join(root, 'sft-train.jsonl'), rows(train));
  await writeFile(join(root, 'sft-val.jsonl'), rows(val));
  // verl's GSM8K SFT example passes exactly these data keys.
  const launch = (dir: string, steps: number, extra: string[] = []) =>
    jobOverrides('sft', [
      'torchrun',
      '--standalone',
      '--nnodes=1',
      '--nproc_per_node=8',
      '-m',
      'verl.trainer.fsdp_sft_trainer',
      `data.train_files=${join(root, 'sft-train.jsonl')}`,
      `data.val_files=${join(root, 'sft-val.jsonl')}`,
      'data.prompt_key=extra_info',
      'data.response_key=extra_info',
      "data.prompt_dict_keys=['question']",
      "+data.response_dict_keys=['answer']",
      'data.train_batch_size=8',
      'data.micro_batch_size_per_gpu=4',
      'data.max_length=16',
      `model.partial_pretrain=${join(root, 'model')}`,
      'optim.lr=3e-3',
      'optim.lr_scheduler=constant',
      'optim.warmup_steps_ratio=0',
      `trainer.default_local_dir=${join(root, dir)}`,
      `trainer.total_training_steps=${steps}`,
      'trainer.save_freq=2',
      'trainer.test_freq=2',
      'trainer.logger=[console,file]',
      'trainer.n_gpus_per_node=8',
      ...extra,
    ]);
  return { root, launch };
}
