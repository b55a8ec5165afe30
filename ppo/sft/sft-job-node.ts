// The SFT job (Node): verl's fsdp_sft_trainer on one WebGPU adapter. Reads model.partial_pretrain (a Hugging Face
// causal LM and its tokenizer) and data.train_files / data.val_files (Parquet or JSONL), then trains
// data.train_batch_size examples per step in micro-batches of data.micro_batch_size_per_gpu (gradients
// accumulate), with AdamW (optim.betas, weight_decay, clip_grad) under warmup (optim.warmup_steps_ratio) and
// optim.lr_scheduler, for trainer.total_training_steps or trainer.total_epochs × (examples // train_batch_size)
// steps, each epoch in a seeded order (trainer.seed). Every trainer.test_freq steps and at the end it reports the
// validation loss; every trainer.save_freq steps and at the end it saves trainer.default_local_dir/global_step_N: a
// Hugging Face directory in the model's own dtype (with the tokenizer), the optimizer state and sft_state.json,
// written last, so a directory without it is an unfinished save. A run resumes from trainer.resume_path, else
// from the newest whole global_step_N in trainer.default_local_dir (verl's resume_mode auto).
import { appendFile, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Engine } from '../../engine/index.ts';
import { loadModel, saveModel } from '../../models/model-files-node.ts';
import { loadTokenizer, readTokenizerFiles } from '../../models/tokenizer-node.ts';
import { ChatTemplate } from '../../models/chat-template.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { exists } from '../../models/fs-node.ts';
import { readRlRecords } from '../data/dataset-node.ts';
import { epochPermutation } from '../data/dataset.ts';
import { learningRate } from '../algorithm/lr-schedule.ts';
import { AdamWOptimizer } from '../update/adamw-optimizer.ts';
import { encodeOptimizerState, decodeOptimizerState } from '../run/optimizer-state.ts';
import { buildSftExamples } from './sft-dataset.ts';
import { SftTrainer, type SftExample } from './sft-trainer.ts';
import type { SftConfig } from './sft-config.ts';

export const SFT_STATE_FILE = 'sft_state.json';
const OPTIMIZER_FILE = 'optimizer.safetensors';
const METRICS_FILE = 'metrics.jsonl';

export interface SftJobResult {
  steps: number;
  /** Loss of each step this run trained. */
  trainLoss: number[];
  /** Validation loss before training (when there is a validation set and the run starts fresh) and at the end. */
  valLossBefore: number | null;
  valLossAfter: number | null;
  /** The last checkpoint: the next stage's model.partial_pretrain. */
  checkpoint: string;
}

/** The newest global_step_N under `dir` whose save finished, or null. */
async function newestCheckpoint(dir: string): Promise<string | null> {
  if (!(await exists(dir))) return null;
  const steps = (await readdir(dir)).map((name) => /^global_step_(\d+)$/.exec(name)).filter((m) => m !== null).map((m) => Number(m![1])).sort((a, b) => b - a);
  for (const step of steps) {
    const candidate = join(dir, `global_step_${step}`);
    if (await exists(join(candidate, SFT_STATE_FILE))) return candidate;
  }
  return null;
}

async function examplesOf(files: string | string[], config: SftConfig, tokenizer: Awaited<ReturnType<typeof loadTokenizer>>, template: ChatTemplate): Promise<SftExample[]> {
  return buildSftExamples(await readRlRecords(files), { ...config.data, tokenizer, template });
}

export async function runSftJob(engine: Engine, config: SftConfig, log: (line: string) => void): Promise<SftJobResult> {
  const started = performance.now();
  const modelDir = config.model.partial_pretrain!;
  const runDir = resolve(config.trainer.default_local_dir);
  const resumeDir = config.trainer.resume_path ?? (await newestCheckpoint(runDir));
  if (config.trainer.resume_path !== null && !(await exists(join(config.trainer.resume_path, SFT_STATE_FILE)))) {
    throw new Error(`trainer.resume_path=${config.trainer.resume_path}: not a finished SFT checkpoint (no ${SFT_STATE_FILE})`);
  }

  const files = await readTokenizerFiles(modelDir);
  const tokenizer = await loadTokenizer(modelDir, 'native');
  const template = new ChatTemplate(files.config, tokenizer.special, files.chatTemplateFile);
  const train = await examplesOf(config.data.train_files!, config, tokenizer, template);
  const val = config.data.val_files === null ? [] : await examplesOf(config.data.val_files, config, tokenizer, template);
  const B = config.data.micro_batch_size_per_gpu;
  const microBatches = config.data.train_batch_size / B;
  const stepsPerEpoch = Math.floor(train.length / config.data.train_batch_size);
  if (stepsPerEpoch === 0) throw new Error(`data.train_files: ${train.length} examples, fewer than data.train_batch_size=${config.data.train_batch_size}`);
  const totalSteps = config.trainer.total_training_steps ?? stepsPerEpoch * config.trainer.total_epochs;

  const loaded = await loadModel(engine, resumeDir ?? modelDir, { label: 'sft' });
  if (loaded.config.head !== 'causal-lm') throw new Error(`model.partial_pretrain=${modelDir}: ${loaded.config.architecture} is not a causal LM`);
  const model = new CausalLm(engine, loaded.config, loaded.params);
  model.trunk.gradientCheckpointing = config.model.enable_gradient_checkpointing;
  const [beta1, beta2] = config.optim.betas;
  const optimizer = new AdamWOptimizer(engine, loaded.params, { lr: config.optim.lr, betas: [beta1, beta2], eps: 1e-8, weightDecay: config.optim.weight_decay, maxGradNorm: config.optim.clip_grad });
  let step = 0;
  if (resumeDir) {
    const state = JSON.parse(await readFile(join(resumeDir, SFT_STATE_FILE), 'utf8')) as { global_step: number };
    const optimizerFile = join(resumeDir, OPTIMIZER_FILE);
    optimizer.loadState(decodeOptimizerState(new Uint8Array(await readFile(optimizerFile)), optimizerFile, loaded.params.layout.slots));
    step = state.global_step;
    log(`resuming from ${resumeDir} (step ${step})`);
  }
  const T = Math.max(...[...train, ...val].map((e) => e.prompt.length + e.response.length));
  const padId = loaded.config.padTokenId ?? tokenizer.special.pad?.id ?? tokenizer.special.eos!.id;
  const trainer = new SftTrainer(engine, model, optimizer, { B, T, padId });
  const schedule = {
    lr: config.optim.lr, lr_warmup_steps: -1, lr_warmup_steps_ratio: config.optim.warmup_steps_ratio,
    lr_scheduler_type: config.optim.lr_scheduler, min_lr_ratio: 0, num_cycles: 0.5,
  };
  const toFile = config.trainer.logger.includes('file');
  await mkdir(runDir, { recursive: true });
  const record = async (metrics: Record<string, number>) => {
    if (toFile) await appendFile(join(runDir, METRICS_FILE), JSON.stringify({ step, data: metrics }) + '\n');
  };
  log(`SFT: ${train.length} examples, ${val.length} held out; ${totalSteps} steps × ${config.data.train_batch_size} examples ` +
    `(${microBatches} micro-batches of ${B}, ≤ ${T} tokens)`);

  const validate = async () => {
    if (val.length < B) return null;
    const loss = await trainer.evaluate(val);
    await record({ 'val/loss': loss });
    log(`validation @ step ${step}: loss ${loss.toFixed(4)}`);
    return loss;
  };
  let checkpoint = resumeDir ?? modelDir;
  const save = async () => {
    const dir = join(runDir, `global_step_${step}`);
    await saveModel(engine, dir, loaded.config, loaded.params, { tokenizerFrom: modelDir, generationConfig: loaded.checkpoint.generationConfig?.raw });
    await writeFile(join(dir, OPTIMIZER_FILE), encodeOptimizerState(await optimizer.saveState()));
    await writeFile(join(dir, SFT_STATE_FILE), JSON.stringify({ global_step: step, total_training_steps: totalSteps }) + '\n');
    checkpoint = dir;
    log(`checkpoint: ${dir}`);
  };

  const valLossBefore = resumeDir ? null : await validate();
  let valLossAfter: number | null = null;
  const trainLoss: number[] = [];
  const { test_freq: testFreq, save_freq: saveFreq } = config.trainer;
  while (step < totalSteps) {
    const epoch = Math.floor(step / stepsPerEpoch);
    const order = epochPermutation(train.length, config.trainer.seed, epoch);
    const first = (step % stepsPerEpoch) * config.data.train_batch_size;
    const batch = Array.from(order.subarray(first, first + config.data.train_batch_size), (i) => train[i]);
    const lr = learningRate(schedule, step, totalSteps);
    const result = await trainer.trainStep(batch, lr, microBatches);
    step++;
    trainLoss.push(result.loss);
    await record({ 'train/loss': result.loss, 'train/lr': lr, 'train/grad_norm': await optimizer.gradNorm(), 'train/epoch': epoch });
    log(`step ${step}/${totalSteps}: loss ${result.loss.toFixed(4)}, lr ${lr.toExponential(2)}, ${Math.round(result.tokensPerSecond)} tokens/s`);
    const last = step === totalSteps;
    if (last || (testFreq > 0 && step % testFreq === 0)) valLossAfter = await validate();
    if (last || (saveFreq > 0 && step % saveFreq === 0)) await save();
  }
  log(`SFT done in ${((performance.now() - started) / 1000).toFixed(0)} s; checkpoint ${checkpoint}`);
  return { steps: step, trainLoss, valLossBefore, valLossAfter, checkpoint };
}
