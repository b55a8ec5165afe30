// The run around a supervised training job (the SFT job, the reward-model job), as verl's fsdp_sft_trainer runs it:
// seeded epoch orders of the training items, train_batch_size items a step under the learning-rate schedule, the
// validation metrics before training, every test_freq steps and at the end, and a checkpoint every save_freq steps
// and at the end: default_local_dir/global_step_N with the model as a Hugging Face directory, the optimizer state and
// job_state.json, written last, so a directory without it is an unfinished save. A job resumes from resume_path, else
// from the newest whole global_step_N (verl's resume_mode auto): weights, AdamW moments and data order, so the resumed
// steps are the uninterrupted run's. Node: reads and writes the run directory.
import { appendFile, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Arena } from '../../engine/index.ts';
import { exists } from '../../models/fs-node.ts';
import { epochPermutation } from '../data/dataset.ts';
import { learningRate, type LrSchedule } from '../algorithm/lr-schedule.ts';
import type { AdamWOptimizer } from '../update/adamw-optimizer.ts';
import { encodeOptimizerState, decodeOptimizerState } from '../update/optimizer-state.ts';

export const JOB_STATE_FILE = 'job_state.json';
const OPTIMIZER_FILE = 'optimizer.safetensors';
const METRICS_FILE = 'metrics.jsonl';

/** The trainer keys the SFT and reward-model jobs share (verl's sft_trainer.yaml trainer group). */
export interface JobTrainerKeys {
  default_local_dir: string;
  resume_path: string | null;
  total_epochs: number;
  total_training_steps: number | null;
  logger: readonly string[];
  seed: number;
  save_freq: number;
  test_freq: number;
}

/** The checkpoint a job resumes from: trainer.resume_path, else the newest whole global_step_N of default_local_dir. */
export async function checkpointToResume(trainer: JobTrainerKeys): Promise<string | null> {
  if (trainer.resume_path !== null) {
    if (!(await exists(join(trainer.resume_path, JOB_STATE_FILE)))) throw new Error(`trainer.resume_path=${trainer.resume_path}: not a finished checkpoint of this job (no ${JOB_STATE_FILE})`);
    return trainer.resume_path;
  }
  const dir = resolve(trainer.default_local_dir);
  if (!(await exists(dir))) return null;
  const steps = (await readdir(dir)).flatMap((name) => /^global_step_(\d+)$/.exec(name)?.[1] ?? []).map(Number).sort((a, b) => b - a);
  for (const step of steps) {
    const candidate = join(dir, `global_step_${step}`);
    if (await exists(join(candidate, JOB_STATE_FILE))) return candidate;
  }
  return null;
}

export interface TrainingJob<Item> {
  name: string;
  items: readonly Item[];
  batchSize: number;
  schedule: LrSchedule;
  trainer: JobTrainerKeys;
  optimizer: AdamWOptimizer;
  params: Arena;
  /** One optimizer step on `batch`; its metrics, 'train/loss' among them. */
  step(batch: Item[], lr: number): Promise<Record<string, number>>;
  /** Held-out metrics ('val/…'), or null without a validation set. */
  validate(): Promise<Record<string, number> | null>;
  /** Writes the model as a Hugging Face directory. */
  saveModel(dir: string): Promise<void>;
}

export interface TrainingJobResult {
  steps: number;
  /** The metrics of each step this run trained. */
  history: Record<string, number>[];
  /** Validation before training (a fresh run with a validation set) and the last one. */
  valBefore: Record<string, number> | null;
  valAfter: Record<string, number> | null;
  /** The last checkpoint: the next stage's input. */
  checkpoint: string | null;
  seconds: number;
}

export async function runTrainingJob<Item>(job: TrainingJob<Item>, resumeDir: string | null, log: (line: string) => void): Promise<TrainingJobResult> {
  const started = performance.now();
  const { trainer } = job;
  const runDir = resolve(trainer.default_local_dir);
  const stepsPerEpoch = Math.floor(job.items.length / job.batchSize);
  if (stepsPerEpoch === 0) throw new Error(`data.train_files: ${job.items.length} training items, fewer than data.train_batch_size=${job.batchSize}`);
  const totalSteps = trainer.total_training_steps ?? stepsPerEpoch * trainer.total_epochs;
  let step = 0;
  if (resumeDir) {
    const state = JSON.parse(await readFile(join(resumeDir, JOB_STATE_FILE), 'utf8')) as { global_step: number };
    const optimizerFile = join(resumeDir, OPTIMIZER_FILE);
    job.optimizer.loadState(decodeOptimizerState(new Uint8Array(await readFile(optimizerFile)), optimizerFile, job.params.layout.slots));
    step = state.global_step;
    log(`resuming from ${resumeDir} (step ${step})`);
  }
  await mkdir(runDir, { recursive: true });
  const toFile = trainer.logger.includes('file');
  const record = async (data: Record<string, number>) => {
    if (toFile) await appendFile(join(runDir, METRICS_FILE), JSON.stringify({ step, data }) + '\n');
  };
  const validate = async () => {
    const metrics = await job.validate();
    if (metrics) {
      await record(metrics);
      log(`validation @ step ${step}: ${Object.entries(metrics).map(([k, v]) => `${k} ${v.toFixed(4)}`).join(', ')}`);
    }
    return metrics;
  };
  let checkpoint = resumeDir;
  const save = async () => {
    const dir = join(runDir, `global_step_${step}`);
    await job.saveModel(dir);
    await writeFile(join(dir, OPTIMIZER_FILE), encodeOptimizerState(await job.optimizer.saveState()));
    await writeFile(join(dir, JOB_STATE_FILE), JSON.stringify({ global_step: step, total_training_steps: totalSteps }) + '\n');
    checkpoint = dir;
    log(`checkpoint: ${dir}`);
  };

  log(`${job.name}: ${job.items.length} training items; ${totalSteps} steps × ${job.batchSize}`);
  const valBefore = resumeDir ? null : await validate();
  let valAfter: Record<string, number> | null = null;
  const history: Record<string, number>[] = [];
  while (step < totalSteps) {
    const epoch = Math.floor(step / stepsPerEpoch);
    const order = epochPermutation(job.items.length, trainer.seed, epoch);
    const first = (step % stepsPerEpoch) * job.batchSize;
    const lr = learningRate(job.schedule, step, totalSteps);
    const metrics = { ...await job.step(Array.from(order.subarray(first, first + job.batchSize), (i) => job.items[i]), lr), 'train/lr': lr, 'train/epoch': epoch };
    step++;
    history.push(metrics);
    await record(metrics);
    log(`step ${step}/${totalSteps}: ${Object.entries(metrics).filter(([k]) => k !== 'train/epoch').map(([k, v]) => `${k.replace('train/', '')} ${Math.abs(v) < 1e-2 ? v.toExponential(2) : v.toFixed(4)}`).join(', ')}`);
    const last = step === totalSteps;
    if (last || (trainer.test_freq > 0 && step % trainer.test_freq === 0)) valAfter = await validate();
    if (last || (trainer.save_freq > 0 && step % trainer.save_freq === 0)) await save();
  }
  const seconds = (performance.now() - started) / 1000;
  log(`${job.name} done in ${seconds.toFixed(0)} s; checkpoint ${checkpoint}`);
  return { steps: step, history, valBefore, valAfter, checkpoint, seconds };
}
