// The reward-model job (Node): model.partial_pretrain (usually the SFT job's checkpoint, a causal LM, or an existing
// reward model) opened as a *ForSequenceClassification with num_labels=1 — a causal LM keeps its trunk and gets a
// fresh bias-free `score`, as transformers' AutoModelForSequenceClassification.from_pretrained(…, num_labels=1) —
// then trained on preference pairs (reward-training/preference-pairs.ts) with the Bradley–Terry loss; the run
// (validation loss, accuracy and mean margin on data.val_files, checkpoints, resume) is supervised-run-node.ts's. Each
// checkpoint is a Hugging Face *ForSequenceClassification that PPO loads as reward_model.model.path and as
// critic.model.path.
import type { Engine } from '../../engine/index.ts';
import { ValueModel } from '../../models/value-model.ts';
import { readRlRecords } from '../data/dataset-node.ts';
import { AdamWOptimizer } from '../training/adamw-optimizer.ts';
import {
  loadJobModel,
  noteSkippedValidation,
  requireTrainingItems,
  saveJobModel,
  runTrainingJob,
  supervisedSettings,
  type JobOutput,
  type TrainingJob,
  type TrainingJobResult,
} from './supervised-run-node.ts';
import { adamwOf, modelTokenizer, sftSchedule } from './sft-job-node.ts';
import { buildPreferencePairs, type PreferencePair } from '../reward-model/preference-pairs.ts';
import { RewardModelTrainer } from '../reward-model/reward-trainer.ts';
import type { RewardConfig } from '../reward-model/reward-config.ts';

/** `log`: the job's progress; `warn`: its notices and stop messages (stderr). */
export async function runRewardJob(
  engine: Engine,
  config: RewardConfig,
  log: (line: string) => void,
  warn = (line: string) => console.error(line),
): Promise<TrainingJobResult> {
  return runTrainingJob(
    config.trainer,
    { log, warn },
    (resumeDir) => loadRewardJob(engine, config, resumeDir, warn),
    supervisedSettings(config.model),
  );
}

/** The reward-model job from model.partial_pretrain, or from the checkpoint it resumes. */
async function loadRewardJob(
  engine: Engine,
  config: RewardConfig,
  resumeDir: string | null,
  warn: JobOutput['warn'],
): Promise<TrainingJob<PreferencePair>> {
  const modelDir = config.model.partial_pretrain!;
  const { tokenizer, template } = await modelTokenizer(modelDir);
  const { data } = config;
  const columns = {
    promptKey: data.prompt_key,
    chosenKey: data.chosen_key,
    rejectedKey: data.rejected_key,
    marginKey: data.margin_key,
  };
  const pairsOf = async (files: string | string[], option: string): Promise<PreferencePair[]> => {
    const { pairs, dropped } = await buildPreferencePairs(await readRlRecords(files), {
      ...columns,
      tokenizer,
      template,
      maxLength: data.max_length,
    });
    if (dropped > 0) warn(`${option}: dropped ${dropped} pairs longer than data.max_length=${data.max_length}`);
    return pairs;
  };
  const train = requireTrainingItems(
    data.train_files!,
    await pairsOf(data.train_files!, 'data.train_files'),
    `preference pairs (none left within data.max_length=${data.max_length})`,
  );
  const val = data.val_files === null ? [] : await pairsOf(data.val_files, 'data.val_files');
  noteSkippedValidation(data.val_files, val.length, data.micro_batch_size_per_gpu, 'pairs', warn);
  const same = (a: readonly number[], b: readonly number[]) => a.length === b.length && a.every((t, i) => t === b[i]);
  if (train.every((p) => same(p.chosen, p.rejected)))
    warn(
      `data.train_files: every pair's ${data.chosen_key} equals its ${data.rejected_key} (as tokens): the reward model ` +
        `has nothing to learn — check data.chosen_key and data.rejected_key`,
    );

  const loaded = await loadJobModel(engine, modelDir, resumeDir, {
    as: 'sequence-classification',
    label: 'reward_model',
    seed: config.trainer.seed,
  });
  // As TRL: a tokenizer without a pad token pads (and marks each row's end) with EOS.
  const padId = loaded.config.padTokenId ?? tokenizer.special.pad?.id ?? tokenizer.special.eos?.id ?? null;
  if (padId === null)
    throw new Error(
      `model.partial_pretrain=${modelDir}: neither config.json nor the tokenizer names a pad or EOS token, which a ` +
        `sequence classifier needs`,
    );
  const modelConfig = { ...loaded.config, padTokenId: padId };
  const model = new ValueModel(engine, modelConfig, loaded.params);
  model.trunk.gradientCheckpointing = config.model.enable_gradient_checkpointing;
  const optimizer = new AdamWOptimizer(engine, loaded.params, adamwOf(config.optim));
  const P = data.micro_batch_size_per_gpu;
  const T = Math.max(...[...train, ...val].map((p) => Math.max(p.chosen.length, p.rejected.length)));
  const trainer = new RewardModelTrainer(engine, model, optimizer, { P, T });
  return {
    name: 'reward model',
    items: train,
    batchSize: data.train_batch_size,
    schedule: sftSchedule(config.optim),
    optimizer,
    params: loaded.params,
    step: async (batch, lr) => {
      const r = await trainer.trainStep(batch, lr);
      return {
        'train/loss': r.loss,
        'train/accuracy': r.accuracy,
        'train/margin': r.margin,
        'train/grad_norm': r.gradNorm,
      };
    },
    validate: async () => {
      if (val.length < P) return null;
      const m = await trainer.evaluate(val);
      return { 'val/loss': m.loss, 'val/accuracy': m.accuracy, 'val/margin': m.margin };
    },
    saveModel: (dir) =>
      saveJobModel(engine, dir, modelConfig, loaded.params, config.trainer.save_dtype, { tokenizerFrom: modelDir }),
  };
}
