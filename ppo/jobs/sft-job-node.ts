// The SFT job (Node): verl's fsdp_sft_trainer on one WebGPU adapter. Reads model.partial_pretrain (a Hugging Face
// causal LM and its tokenizer) and data.train_files / data.val_files (Parquet or JSONL) as verl's SFT datasets, and
// trains data.train_batch_size examples per step in micro-batches of data.micro_batch_size_per_gpu (gradients
// accumulate), with AdamW (optim.betas, weight_decay, clip_grad) under warmup (optim.warmup_steps_ratio) and
// optim.lr_scheduler; the run, its validation loss, checkpoints (in the model's own dtype, with the tokenizer) and
// resume are supervised-run-node.ts's. With model.lora_rank > 0 only PEFT-style LoRA adapters train (the base is
// frozen, as for PPO's actor): a checkpoint is then the unchanged base model with the adapters in PEFT's format in
// lora_adapter/ (the directory name verl's workers use) and their AdamW state; resume restores both.
import { join } from 'node:path';
import type { Engine } from '../../engine/index.ts';
import { loadTokenizer, readTokenizerFiles } from '../../models/tokenizer-node.ts';
import { ChatTemplate } from '../../models/chat-template.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import type { DecoderConfig } from '../../models/hf-config.ts';
import { exists } from '../../models/fs-node.ts';
import { LoraAdapters } from '../../models/lora-adapters.ts';
import { describeLoraSettings, initialLoraValues, sameLoraSettings } from '../../models/lora.ts';
import { LORA_ADAPTER_DIR, loadLoraAdapter, saveLoraAdapter } from '../../models/lora-files-node.ts';
import { readRlRecords } from '../data/dataset-node.ts';
import { AdamWOptimizer } from '../training/adamw-optimizer.ts';
import { buildSftExamples } from '../sft/sft-dataset.ts';
import { SftTrainer, type SftExample } from '../sft/sft-trainer.ts';
import { sftLoraSettings, type SftConfig } from '../sft/sft-config.ts';
import {
  loadJobModel,
  noteSkippedValidation,
  requireTrainingItems,
  saveJobModel,
  runTrainingJob,
  supervisedSettings,
  type TrainingJob,
  type TrainingJobResult,
} from './supervised-run-node.ts';

/** The tokenizer of a model directory and its chat template (null when it has none). */
export async function modelTokenizer(dir: string) {
  const files = await readTokenizerFiles(dir);
  const tokenizer = await loadTokenizer(dir, 'native');
  const hasTemplate = files.chatTemplateFile !== null || (files.config.chat_template ?? null) !== null;
  return {
    tokenizer,
    template: hasTemplate ? new ChatTemplate(files.config, tokenizer.special, files.chatTemplateFile) : null,
  };
}

/**
 * verl's learning-rate schedule of the SFT trainer: linear warmup over warmup_steps_ratio, then cosine to 0 or
 * constant.
 */
export function sftSchedule(optim: SftConfig['optim']) {
  return {
    lr: optim.lr,
    lr_warmup_steps: -1,
    lr_warmup_steps_ratio: optim.warmup_steps_ratio,
    lr_scheduler_type: optim.lr_scheduler,
    min_lr_ratio: 0,
    num_cycles: 0.5,
  };
}

export function adamwOf(optim: SftConfig['optim']) {
  const [beta1, beta2] = optim.betas;
  return {
    lr: optim.lr,
    betas: [beta1, beta2] as [number, number],
    eps: 1e-8,
    weightDecay: optim.weight_decay,
    maxGradNorm: optim.clip_grad,
  };
}

/** The adapters to train (null: full fine-tuning): a resumed checkpoint's, else fresh ones (PEFT's initialisation,
 *  B = 0, seeded by trainer.seed). A checkpoint trained the other way, or with other LoRA settings, is refused. */
async function sftLoraAdapters(
  engine: Engine,
  config: SftConfig,
  model: DecoderConfig,
  resumeDir: string | null,
): Promise<LoraAdapters | null> {
  const settings = sftLoraSettings(config.model);
  if (resumeDir === null)
    return (
      settings &&
      new LoraAdapters(engine, model, settings, initialLoraValues(model, settings, config.trainer.seed), 'sft')
    );
  const adapterDir = join(resumeDir, LORA_ADAPTER_DIR);
  const hasAdapter = await exists(adapterDir);
  if (!hasAdapter) {
    if (settings)
      throw new Error(
        `resume: the checkpoint ${resumeDir} trained the whole model (no ${LORA_ADAPTER_DIR}/) but ` +
          `model.lora_rank=${settings.rank}; drop lora_rank or start a new trainer.default_local_dir`,
      );
    return null;
  }
  if (!settings)
    throw new Error(
      `resume: the checkpoint ${resumeDir} trained LoRA adapters (${LORA_ADAPTER_DIR}/) but model.lora_rank=0; set ` +
        `model.lora_rank as that run did`,
    );
  const adapters = await loadLoraAdapter(engine, adapterDir, model, 'sft');
  if (!sameLoraSettings(adapters.settings, settings))
    throw new Error(
      `resume: the adapter in ${adapterDir} has ${describeLoraSettings(adapters.settings)}; model.* gives ` +
        `${describeLoraSettings(settings)} — give them as that run did, or a fresh trainer.default_local_dir`,
    );
  return adapters;
}

/** `log`: the job's progress; `warn`: its notices and stop messages (stderr). */
export async function runSftJob(
  engine: Engine,
  config: SftConfig,
  log: (line: string) => void,
  warn = (line: string) => console.error(line),
): Promise<TrainingJobResult> {
  return runTrainingJob(
    config.trainer,
    { log, warn },
    (resumeDir) => loadSftJob(engine, config, resumeDir, warn),
    supervisedSettings(config.model),
  );
}

/** The SFT job from model.partial_pretrain, or from the checkpoint it resumes (weights, LoRA adapters). */
async function loadSftJob(
  engine: Engine,
  config: SftConfig,
  resumeDir: string | null,
  warn: (line: string) => void,
): Promise<TrainingJob<SftExample>> {
  const modelDir = config.model.partial_pretrain!;
  const { tokenizer, template } = await modelTokenizer(modelDir);
  if (!template)
    throw new Error(
      `model.partial_pretrain=${modelDir}: the tokenizer has no chat template, which verl's SFT datasets apply`,
    );
  const examplesOf = async (files: string | string[]): Promise<SftExample[]> =>
    buildSftExamples(await readRlRecords(files), { ...config.data, tokenizer, template });
  const train = requireTrainingItems(config.data.train_files!, await examplesOf(config.data.train_files!), 'examples');
  const val = config.data.val_files === null ? [] : await examplesOf(config.data.val_files);
  noteSkippedValidation(config.data.val_files, val.length, config.data.micro_batch_size_per_gpu, 'examples', warn);

  const loaded = await loadJobModel(engine, modelDir, resumeDir, { label: 'sft' });
  if (loaded.config.head !== 'causal-lm')
    throw new Error(`model.partial_pretrain=${modelDir}: ${loaded.config.architecture} is not a causal LM`);
  const model = new CausalLm(engine, loaded.config, loaded.params);
  model.trunk.gradientCheckpointing = config.model.enable_gradient_checkpointing;
  const lora = await sftLoraAdapters(engine, config, loaded.config, resumeDir);
  model.trunk.lora = lora;
  const trained = lora ? lora.params : loaded.params;
  const optimizer = new AdamWOptimizer(
    engine,
    trained,
    adamwOf(config.optim),
    lora && ((grads) => lora.clearOffBlockGradients(grads)),
  );
  const B = config.data.micro_batch_size_per_gpu;
  const T = Math.max(...[...train, ...val].map((e) => e.prompt.length + e.response.length));
  const padId = loaded.config.padTokenId ?? tokenizer.special.pad?.id ?? tokenizer.special.eos!.id;
  const trainer = new SftTrainer(engine, model, optimizer, { B, T, padId });
  return {
    name: 'SFT',
    items: train,
    batchSize: config.data.train_batch_size,
    schedule: sftSchedule(config.optim),
    optimizer,
    params: trained,
    step: async (batch, lr) => {
      const result = await trainer.trainStep(batch, lr, batch.length / B);
      return {
        'train/loss': result.loss,
        'train/grad_norm': await optimizer.gradNorm(),
        'train/tokens_per_s': result.tokensPerSecond,
      };
    },
    validate: async () => (val.length < B ? null : { 'val/loss': await trainer.evaluate(val) }),
    saveModel: async (dir) => {
      await saveJobModel(engine, dir, loaded.config, loaded.params, config.trainer.save_dtype, {
        tokenizerFrom: modelDir,
        generationConfig: loaded.checkpoint.generationConfig?.raw,
      });
      if (lora) await saveLoraAdapter(join(dir, LORA_ADAPTER_DIR), lora, modelDir);
    },
  };
}
