// One PPO step with a GAE critic on a Qwen3-shaped model at real scale: `node tools/qwen3-ppo-step.js [--hidden
// 1024|128] [--layers N] [--keep DIR] [--no-save]`. Writes a bf16 checkpoint with the real Qwen3 tokenizer (vocabulary
// 151,936; hidden 1,024 is Qwen3-0.6B's layer: 16/8 heads of 128, intermediate 3,072) and a few GSM8K problems in
// verl's RL schema into a temporary directory, runs `node train.js` on them for one step (memory plan, step line with
// each phase's time, tokens/s and the measured peak; then the step's perf/readbacks and perf/upload_bytes), then
// reloads the saved actor and critic (--no-save: the step alone, as the GPU report times it). On lavapipe the 151,936 ×
// 1,024 embedding (622 MB) is above the 128 MiB binding limit: this is the split path at full size.
import { mkdtemp, readFile, writeFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine } from '../engine/index.ts';
import { main } from '../ppo/jobs/ppo-job-node.ts';
import { loadModel } from '../models/model-files-node.ts';
import { writeQwen3Model, QWEN3_0_6B_LAYER, QWEN3_TINY_LAYER } from './qwen3-model.ts';

const PROBLEMS = [
  {
    q:
      'Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many ' +
      'clips did Natalia sell altogether in April and May?',
    a: '72',
  },
  {
    q:
      'Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. How much did she ' +
      'earn?',
    a: '10',
  },
  {
    q:
      'Betty is saving money for a new wallet which costs $100. Betty has only half of the money she needs. How ' +
      'much more money does Betty need?',
    a: '50',
  },
  {
    q: 'James writes a 3-page letter to 2 different friends twice a week. How many pages does he write a year?',
    a: '624',
  },
];

function gsm8kJsonl(): string {
  return `${PROBLEMS.map(({ q, a }, index) =>
    JSON.stringify({
      data_source: 'openai/gsm8k',
      prompt: [{ role: 'user', content: `${q} Let's think step by step and output the final answer after "####".` }],
      ability: 'math',
      reward_model: { ground_truth: a, style: 'rule' },
      extra_info: { answer: `#### ${a}`, index, question: q, split: 'train' },
    }),
  ).join('\n')}\n`;
}

export async function runQwen3PpoStep(argv: string[]): Promise<number> {
  const option = (name: string) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const hidden = Number(option('hidden') ?? 1024);
  const layers = Number(option('layers') ?? 1);
  const root = option('keep') ?? (await mkdtemp(join(tmpdir(), 'qwen3-ppo-')));
  const save = !argv.includes('--no-save');
  try {
    const model = join(root, 'model');
    let started = performance.now();
    await writeQwen3Model(model, { ...(hidden === 1024 ? QWEN3_0_6B_LAYER : QWEN3_TINY_LAYER), layers });
    console.log(
      `wrote ${model} (hidden ${hidden}, ${layers} layers, bf16) in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
    await writeFile(join(root, 'gsm8k.jsonl'), gsm8kJsonl());
    const runDir = join(root, 'run');
    started = performance.now();
    const code = await main([
      `actor_rollout_ref.model.path=${model}`,
      `data.train_files=${join(root, 'gsm8k.jsonl')}`,
      'data.val_files=null',
      'data.train_batch_size=2',
      'data.max_prompt_length=128',
      'data.max_response_length=16',
      'actor_rollout_ref.actor.ppo_mini_batch_size=2',
      'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1',
      'critic.ppo_micro_batch_size_per_gpu=1',
      'actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1',
      'critic.forward_micro_batch_size_per_gpu=1',
      'algorithm.adv_estimator=gae',
      'trainer.total_training_steps=1',
      `trainer.save_freq=${save ? 1 : -1}`,
      'trainer.val_before_train=false',
      'trainer.logger=[console,file]',
      `trainer.default_local_dir=${runDir}`,
    ]);
    console.log(`train.js: exit ${code} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    if (code !== 0) return code;
    const [step] = (await readFile(join(runDir, 'metrics.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line).data);
    console.log(
      `step 1: ${step['perf/readbacks']} read-backs (${step['perf/readback_bytes']} bytes), ${step['perf/uploads']} ` +
        `uploads of ${step['perf/upload_bytes']} bytes, ` +
        `${step['timing_s/step'].toFixed(1)} s`,
    );
    if (!save) return code;
    const engine = await Engine.create();
    try {
      for (const role of ['actor', 'critic']) {
        const loaded = await loadModel(engine, join(runDir, 'global_step_1', role));
        console.log(
          `reloaded ${role}: ${loaded.config.architecture}, torch_dtype ${loaded.config.torchDtype}, ` +
            `${loaded.params.segments.length} bindable segments`,
        );
      }
    } finally {
      engine.destroy();
    }
    return 0;
  } finally {
    if (!option('keep')) await rm(root, { recursive: true, force: true });
  }
}
