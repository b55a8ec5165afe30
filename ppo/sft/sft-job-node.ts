// The SFT job (Node): verl's fsdp_sft_trainer on one WebGPU adapter. Reads model.partial_pretrain (a Hugging Face
// causal LM and its tokenizer) and data.train_files / data.val_files (Parquet or JSONL) as verl's SFT datasets, and
// trains data.train_batch_size examples per step in micro-batches of data.micro_batch_size_per_gpu (gradients
// accumulate), with AdamW (optim.betas, weight_decay, clip_grad) under warmup (optim.warmup_steps_ratio) and
// optim.lr_scheduler; the run, its validation loss, checkpoints (in the model's own dtype, with the tokenizer) and
// resume are training-job-node.ts's.
import type { Engine } from '../../engine/index.ts';
import { loadModel, saveModel } from '../../models/model-files-node.ts';
import { loadTokenizer, readTokenizerFiles } from '../../models/tokenizer-node.ts';
import { ChatTemplate } from '../../models/chat-template.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { readRlRecords } from '../data/dataset-node.ts';
import { AdamWOptimizer } from '../update/adamw-optimizer.ts';
import { buildSftExamples } from './sft-dataset.ts';
import { SftTrainer, type SftExample } from './sft-trainer.ts';
import type { SftConfig } from './sft-config.ts';
import { checkpointToResume, runTrainingJob, type TrainingJobResult } from './training-job-node.ts';

/** The tokenizer of a model directory and its chat template (null when it has none). */
export async function modelTokenizer(dir: string) {
  const files = await readTokenizerFiles(dir);
  const tokenizer = await loadTokenizer(dir, 'native');
  const hasTemplate = files.chatTemplateFile !== null || (files.config.chat_template ?? null) !== null;
  return { tokenizer, template: hasTemplate ? new ChatTemplate(files.config, tokenizer.special, files.chatTemplateFile) : null };
}

/** verl's learning-rate schedule of the SFT trainer: linear warmup over warmup_steps_ratio, then cosine to 0 or constant. */
export function sftSchedule(optim: SftConfig['optim']) {
  return { lr: optim.lr, lr_warmup_steps: -1, lr_warmup_steps_ratio: optim.warmup_steps_ratio, lr_scheduler_type: optim.lr_scheduler, min_lr_ratio: 0, num_cycles: 0.5 };
}

export function adamwOf(optim: SftConfig['optim']) {
  const [beta1, beta2] = optim.betas;
  return { lr: optim.lr, betas: [beta1, beta2] as [number, number], eps: 1e-8, weightDecay: optim.weight_decay, maxGradNorm: optim.clip_grad };
}

export async function runSftJob(engine: Engine, config: SftConfig, log: (line: string) => void): Promise<TrainingJobResult> {
  const modelDir = config.model.partial_pretrain!;
  const resumeDir = await checkpointToResume(config.trainer);
  const { tokenizer, template } = await modelTokenizer(modelDir);
  if (!template) throw new Error(`model.partial_pretrain=${modelDir}: the tokenizer has no chat template, which verl's SFT datasets apply`);
  const examplesOf = async (files: string | string[]): Promise<SftExample[]> => buildSftExamples(await readRlRecords(files), { ...config.data, tokenizer, template });
  const train = await examplesOf(config.data.train_files!);
  const val = config.data.val_files === null ? [] : await examplesOf(config.data.val_files);

  const loaded = await loadModel(engine, resumeDir ?? modelDir, { label: 'sft' });
  if (loaded.config.head !== 'causal-lm') throw new Error(`model.partial_pretrain=${modelDir}: ${loaded.config.architecture} is not a causal LM`);
  const model = new CausalLm(engine, loaded.config, loaded.params);
  model.trunk.gradientCheckpointing = config.model.enable_gradient_checkpointing;
  const optimizer = new AdamWOptimizer(engine, loaded.params, adamwOf(config.optim));
  const B = config.data.micro_batch_size_per_gpu;
  const T = Math.max(...[...train, ...val].map((e) => e.prompt.length + e.response.length));
  const padId = loaded.config.padTokenId ?? tokenizer.special.pad?.id ?? tokenizer.special.eos!.id;
  const trainer = new SftTrainer(engine, model, optimizer, { B, T, padId });
  return runTrainingJob({
    name: 'SFT', items: train, batchSize: config.data.train_batch_size, schedule: sftSchedule(config.optim), trainer: config.trainer,
    optimizer, params: loaded.params,
    step: async (batch, lr) => {
      const result = await trainer.trainStep(batch, lr, batch.length / B);
      return { 'train/loss': result.loss, 'train/grad_norm': await optimizer.gradNorm(), 'train/tokens_per_s': result.tokensPerSecond };
    },
    validate: async () => (val.length < B ? null : { 'val/loss': await trainer.evaluate(val) }),
    saveModel: (dir) => saveModel(engine, dir, loaded.config, loaded.params, { tokenizerFrom: modelDir, generationConfig: loaded.checkpoint.generationConfig?.raw }),
  }, resumeDir, log);
}
