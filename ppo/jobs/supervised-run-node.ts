// The run around a supervised training job (the SFT job, the reward-model job), as verl's fsdp_sft_trainer runs it:
// seeded epoch orders of the training items, train_batch_size items a step under the learning-rate schedule, the
// validation metrics before training, every test_freq steps and at the end, and a checkpoint every save_freq steps
// and at the end: default_local_dir/global_step_N with the model as a Hugging Face directory, the optimizer state and
// job_state.json. A job resumes from resume_path, else from the newest whole global_step_N (verl's resume_mode auto;
// an unreadable one is moved aside, as train.js does): weights, AdamW moments and data order, so the resumed steps
// are the uninterrupted run's. A non-finite metric stops the job as it stops train.js (finite-guard.ts).
// The run directory is kept as the PPO trainer keeps it (run-directory-node.ts, run-lock-node.ts,
// stop-signals-node.ts): nothing is written before every input has loaded; one run at a time holds the directory's
// lock; a fresh start moves a previous run aside and a resumed one drops the metrics lines past its checkpoint;
// checkpoints are renamed into place whole; Ctrl-C, SIGTERM or SIGHUP finishes the step under way, saves it and
// stops (the same command resumes), a second signal abandons the step.
import { appendFile, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Arena, Engine } from '../../engine/index.ts';
import type { DecoderConfig, TorchDtype } from '../../models/hf-config.ts';
import {
  loadModel,
  saveModel,
  type LoadedModel,
  type LoadModelOptions,
  type SaveModelOptions,
} from '../../models/model-files-node.ts';
import { exists } from '../../models/fs-node.ts';
import { epochPermutation } from '../data/dataset.ts';
import { learningRate, type LrSchedule } from '../algorithm/lr-schedule.ts';
import type { AdamWOptimizer } from '../training/adamw-optimizer.ts';
import { decodeOptimizerState } from '../training/optimizer-state.ts';
import { writeOptimizerState } from '../training/optimizer-state-node.ts';
import { METRICS_FILE } from '../loggers/tracking-node.ts';
import { checkRunLockFree } from '../run-directory/run-lock-node.ts';
import {
  claimRunDirectory,
  setAsideUnreadableCheckpoints,
  startRunHistory,
  type UnreadableCheckpoint,
} from '../run-directory/run-directory-node.ts';
import { openHfCheckpoint } from '../../models/checkpoint-io-node.ts';
import { SafetensorsFile } from '../../models/safetensors-node.ts';
import { ADAPTER_WEIGHTS_FILE, LORA_ADAPTER_DIR } from '../../models/lora-files-node.ts';
import { stepDirectories, stepDirectory, writeStepDirectory } from '../run-directory/step-directory-node.ts';
import { interruptedLine, stopOnSignalDuringSetup, watchStopSignals, type StopSignal } from './stop-signals-node.ts';
import { stopError, type StopSave } from './ppo-run-loop.ts';
import { checkFinite, guardStep, NonFiniteError } from '../training/finite-guard.ts';

export const JOB_STATE_FILE = 'job_state.json';
/** Inside a checkpoint whose model is stored in a half dtype: the float32 weights the optimizer trained. */
export const MASTER_WEIGHTS_DIR = 'master_weights';
const OPTIMIZER_FILE = 'optimizer.safetensors';

/** The trainer keys the SFT and reward-model jobs share (verl's sft_trainer.yaml trainer group). */
export interface JobTrainerKeys {
  save_dtype: 'auto' | TorchDtype;
  default_local_dir: string;
  resume_path: string | null;
  total_epochs: number;
  total_training_steps: number | null;
  logger: readonly string[];
  seed: number;
  save_freq: number;
  test_freq: number;
}

/** Where a job's lines go: its progress (the console logger) and its notices and stop messages (stderr, always). */
export interface JobOutput {
  log(line: string): void;
  warn(line: string): void;
}

/**
 * Why a job checkpoint cannot be resumed (a save killed by something no process catches, a full disk, a file deleted
 * by hand), or null when it is whole: job_state.json parses, and the model, its optimizer state and any LoRA adapter
 * have valid headers. Headers only, as train.js checks its own (checkpoint-node.ts checkpointProblem).
 */
async function jobCheckpointProblem(dir: string): Promise<string | null> {
  try {
    const stateFile = join(dir, JOB_STATE_FILE);
    const state = JSON.parse(await readFile(stateFile, 'utf8')) as { global_step?: unknown };
    if (!Number.isInteger(state.global_step)) return `${stateFile} has no integer global_step`;
    const { tensors } = await openHfCheckpoint(dir);
    await tensors.close();
    (await SafetensorsFile.open(join(dir, OPTIMIZER_FILE))).close();
    if (await exists(join(dir, MASTER_WEIGHTS_DIR))) {
      const master = await openHfCheckpoint(join(dir, MASTER_WEIGHTS_DIR));
      await master.tensors.close();
    }
    if (await exists(join(dir, LORA_ADAPTER_DIR)))
      (await SafetensorsFile.open(join(dir, LORA_ADAPTER_DIR, ADAPTER_WEIGHTS_FILE))).close();
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

/**
 * The checkpoint a job resumes from: trainer.resume_path (refused when it is not whole), else the newest whole
 * global_step_N of default_local_dir (verl's resume_mode auto), with the newer ones it fell back past.
 */
async function checkpointToResume(
  trainer: JobTrainerKeys,
): Promise<{ resumeDir: string | null; unreadable: UnreadableCheckpoint[] }> {
  if (trainer.resume_path !== null) {
    if (!(await exists(join(trainer.resume_path, JOB_STATE_FILE))))
      throw new Error(
        `trainer.resume_path=${trainer.resume_path}: not a finished checkpoint of this job (no ${JOB_STATE_FILE})`,
      );
    const problem = await jobCheckpointProblem(trainer.resume_path);
    if (problem) throw new Error(`trainer.resume_path=${trainer.resume_path} cannot be resumed: ${problem}`);
    return { resumeDir: trainer.resume_path, unreadable: [] };
  }
  const dir = resolve(trainer.default_local_dir);
  const unreadable: UnreadableCheckpoint[] = [];
  for (const step of (await stepDirectories(dir)).reverse()) {
    const candidate = stepDirectory(dir, step);
    // No job_state.json: a save that never finished; the next start's staging clean-up and fresh start handle it.
    if (!(await exists(join(candidate, JOB_STATE_FILE)))) continue;
    const problem = await jobCheckpointProblem(candidate);
    if (problem === null) return { resumeDir: candidate, unreadable };
    unreadable.push({ dir: candidate, problem });
  }
  return { resumeDir: null, unreadable };
}

export interface TrainingJob<Item> {
  name: string;
  items: readonly Item[];
  batchSize: number;
  schedule: LrSchedule;
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
  /** The signal that stopped the job after it saved its last completed step; null when it ran to its end. */
  stoppedBy: StopSignal | null;
  seconds: number;
}

/**
 * One step whose every metric is finite, as the PPO trainer's guard demands: a NaN or Inf loss or gradient norm stops
 * the job naming the last good checkpoint (adamw.wgsl skipped a non-finite gradient's update, so the weights on the
 * device are still those of the last good step) instead of training on with every update skipped.
 */
async function finiteStep<Item>(job: TrainingJob<Item>, batch: Item[], lr: number): Promise<Record<string, number>> {
  const metrics = await job.step(batch, lr);
  for (const [name, value] of Object.entries(metrics)) checkFinite(name, value);
  return metrics;
}

/**
 * Writes the trained model of a checkpoint: the Hugging Face directory in trainer.save_dtype (auto: the dtype the
 * model came in), and, when that is not float32, the float32 weights beside it (MASTER_WEIGHTS_DIR), which a resume
 * loads: rounded to bf16 and back, the resumed steps would drift from the uninterrupted run's.
 */
export async function saveJobModel(
  engine: Engine,
  dir: string,
  config: DecoderConfig,
  params: Arena,
  saveDtype: JobTrainerKeys['save_dtype'],
  options: Omit<SaveModelOptions, 'dtype'>,
): Promise<void> {
  const dtype = saveDtype === 'auto' ? config.torchDtype : saveDtype;
  await saveModel(engine, dir, config, params, { ...options, dtype });
  if (dtype !== 'float32') await saveModel(engine, join(dir, MASTER_WEIGHTS_DIR), config, params, { dtype: 'float32' });
}

/**
 * The model a job starts from: model.partial_pretrain, or a resumed checkpoint's float32 weights where it has them,
 * with the dtype of the model it exports (so save_dtype=auto keeps exporting the model's own dtype).
 */
export async function loadJobModel(
  engine: Engine,
  modelDir: string,
  resumeDir: string | null,
  options: LoadModelOptions,
): Promise<LoadedModel> {
  const master = resumeDir === null ? null : join(resumeDir, MASTER_WEIGHTS_DIR);
  if (master === null || !(await exists(master))) return loadModel(engine, resumeDir ?? modelDir, options);
  const loaded = await loadModel(engine, master, options);
  const exported = await openHfCheckpoint(resumeDir!, { as: options.as });
  await exported.tensors.close();
  return { ...loaded, config: { ...loaded.config, torchDtype: exported.config.torchDtype } };
}

/** The step a checkpoint holds, and its optimizer state loaded into the job. */
async function restoreJobState(job: TrainingJob<unknown>, resumeDir: string): Promise<number> {
  const stateFile = join(resumeDir, JOB_STATE_FILE);
  let step: unknown;
  try {
    step = (JSON.parse(await readFile(stateFile, 'utf8')) as { global_step?: unknown }).global_step;
  } catch (err) {
    throw new Error(`${stateFile}: cannot be read as JSON (${(err as Error).message})`, { cause: err });
  }
  if (!Number.isInteger(step) || (step as number) < 0)
    throw new Error(`${stateFile}: expected "global_step" to be a step number, found ${JSON.stringify(step)}`);
  const optimizerFile = join(resumeDir, OPTIMIZER_FILE);
  job.optimizer.loadState(
    decodeOptimizerState(new Uint8Array(await readFile(optimizerFile)), optimizerFile, job.params.layout.slots),
  );
  return step as number;
}

const filesText = (files: string | string[]) => (Array.isArray(files) ? `[${files.join(', ')}]` : files);

/** A job's training items, refused when there are none (an empty file, every row dropped), naming the files. */
export function requireTrainingItems<T>(files: string | string[], items: readonly T[], what: string): readonly T[] {
  if (items.length === 0)
    throw new Error(`data.train_files=${filesText(files)}: no ${what} to train on — expected at least one row`);
  return items;
}

/** Validation items that fill no micro-batch validate nothing: said on stderr rather than skipped in silence. */
export function noteSkippedValidation(
  files: string | string[] | null,
  count: number,
  microBatch: number,
  what: string,
  warn: (line: string) => void,
): void {
  if (files !== null && count < microBatch)
    warn(
      `data.val_files=${filesText(files)}: ${count} ${what}, fewer than data.micro_batch_size_per_gpu=${microBatch} — ` +
        'no validation runs',
    );
}

/**
 * The keys a resumed job must keep, as given (model.partial_pretrain, model.lora_rank, …): job_state.json records
 * them, and a resume with another value stops naming both, instead of silently training the checkpoint's.
 */
export type JobSettings = Record<string, unknown>;

/** What an SFT or reward-model job must keep: the model it trains (resolved, so any spelling of a path matches). */
export function supervisedSettings(model: { partial_pretrain: string | null }): JobSettings {
  return { 'model.partial_pretrain': model.partial_pretrain && resolve(model.partial_pretrain) };
}

/** One line naming the key, the checkpoint's value and this run's, for the first key that differs. */
async function assertSameSettings(resumeDir: string, settings: JobSettings): Promise<void> {
  const stateFile = join(resumeDir, JOB_STATE_FILE);
  const saved = (JSON.parse(await readFile(stateFile, 'utf8')) as { settings?: JobSettings }).settings ?? {};
  for (const [key, value] of Object.entries(settings)) {
    // A checkpoint from before the key was recorded cannot say; it is trusted.
    if (!(key in saved) || JSON.stringify(saved[key]) === JSON.stringify(value)) continue;
    throw new Error(
      `resume: ${resumeDir} was trained with ${key}=${JSON.stringify(saved[key])}, this run has ${key}=` +
        `${JSON.stringify(value)} — give ${key} as that run did, or a fresh trainer.default_local_dir`,
    );
  }
}

/**
 * Runs the job `load` builds from the checkpoint it resumes (null: a fresh start). `load` reads every input (model,
 * tokenizer, data); only then is the run directory written.
 */
export async function runTrainingJob<Item>(
  trainer: JobTrainerKeys,
  { log, warn }: JobOutput,
  load: (resumeDir: string | null) => Promise<TrainingJob<Item>>,
  settings: JobSettings = {},
): Promise<TrainingJobResult> {
  const started = performance.now();
  const runDir = resolve(trainer.default_local_dir);
  await checkRunLockFree(runDir);
  const { resumeDir, unreadable } = await checkpointToResume(trainer);
  if (resumeDir) await assertSameSettings(resumeDir, settings);
  const stopWatchingSetup = stopOnSignalDuringSetup('loading the model and data', warn);
  let job: TrainingJob<Item>;
  let startStep = 0;
  try {
    job = await load(resumeDir);
    if (resumeDir) startStep = await restoreJobState(job as TrainingJob<unknown>, resumeDir);
  } finally {
    stopWatchingSetup();
  }
  const stepsPerEpoch = Math.floor(job.items.length / job.batchSize);
  if (stepsPerEpoch === 0)
    throw new Error(
      `data.train_files: ${job.items.length} training items, fewer than data.train_batch_size=${job.batchSize}`,
    );
  const totalSteps = trainer.total_training_steps ?? stepsPerEpoch * trainer.total_epochs;
  if (resumeDir) log(`resuming from ${resumeDir} (step ${startStep})`);

  let step = startStep;
  let checkpoint = resumeDir;
  /** The step of the newest checkpoint (a resumed job's starting one counts: it is that step). */
  let savedStep = resumeDir ? startStep : -1;
  const stop = watchStopSignals(() => ({ step, lastCheckpoint: checkpoint }), warn);
  let releaseLock = () => {};
  try {
    releaseLock = await claimRunDirectory(runDir, warn);
    await setAsideUnreadableCheckpoints(unreadable, resumeDir, warn);
    await startRunHistory(runDir, resumeDir ? startStep : null, warn);
    const toFile = trainer.logger.includes('file');
    const record = async (data: Record<string, number>) => {
      if (toFile) await appendFile(join(runDir, METRICS_FILE), `${JSON.stringify({ step, data })}\n`);
    };
    const validate = async () => {
      const metrics = await job.validate();
      if (metrics) {
        await record(metrics);
        log(
          `validation @ step ${step}: ${Object.entries(metrics)
            .map(([k, v]) => `${k} ${v.toFixed(4)}`)
            .join(', ')}`,
        );
      }
      return metrics;
    };
    const save = async () => {
      stop.phase = 'writing-checkpoint';
      checkpoint = await writeStepDirectory(
        runDir,
        step,
        async (dir) => {
          await job.saveModel(dir);
          await writeOptimizerState(join(dir, OPTIMIZER_FILE), await job.optimizer.saveState());
          await writeFile(
            join(dir, JOB_STATE_FILE),
            `${JSON.stringify({ global_step: step, total_training_steps: totalSteps, settings })}\n`,
          );
        },
        () => (stop.phase = 'renaming-checkpoint'),
      );
      savedStep = step;
      // Until the next step starts, a signal stops the job at the top of the loop, with this save as its checkpoint.
      stop.phase = 'step';
      log(`checkpoint: ${checkpoint}`);
    };

    /** A step or a validation threw: the last completed step is saved unless it is (or nothing was completed), as
     *  train.js does; a non-finite loss saves nothing (the guard stopped the step before the optimizer applied it). */
    const stopOnError = async (err: unknown): Promise<never> => {
      let saved: StopSave = step === startStep ? 'no step completed' : savedStep === step ? 'already saved' : 'saved';
      if (saved === 'saved' && !(err instanceof NonFiniteError)) {
        try {
          await save();
        } catch {
          saved = 'not saved';
        }
      }
      throw stopError(err, saved, step, checkpoint, (dir) => `${dir}: the same command resumes from it`);
    };

    log(`${job.name}: ${job.items.length} training items; ${totalSteps} steps × ${job.batchSize}`);
    const valBefore = resumeDir ? null : await validate();
    let valAfter: Record<string, number> | null = null;
    const history: Record<string, number>[] = [];
    while (step < totalSteps && !stop.requested) {
      stop.phase = 'step';
      const epoch = Math.floor(step / stepsPerEpoch);
      const order = epochPermutation(job.items.length, trainer.seed, epoch);
      const first = (step % stepsPerEpoch) * job.batchSize;
      const lr = learningRate(job.schedule, step, totalSteps);
      const batch = Array.from(order.subarray(first, first + job.batchSize), (i) => job.items[i]);
      const metrics = {
        ...(await guardStep(step + 1, checkpoint, () => finiteStep(job, batch, lr)).catch(stopOnError)),
        'train/lr': lr,
        'train/epoch': epoch,
      };
      step++;
      history.push(metrics);
      await record(metrics);
      log(
        `step ${step}/${totalSteps}: ${Object.entries(metrics)
          .filter(([k]) => k !== 'train/epoch')
          .map(([k, v]) => `${k.replace('train/', '')} ${Math.abs(v) < 1e-2 ? v.toExponential(2) : v.toFixed(4)}`)
          .join(', ')}`,
      );
      // A stop asked for during the step saves it at once, without the validation due.
      if (stop.requested) break;
      const last = step === totalSteps;
      if (last || (trainer.test_freq > 0 && step % trainer.test_freq === 0)) {
        stop.phase = 'validation';
        valAfter = await validate().catch(stopOnError);
      }
      if (last || (trainer.save_freq > 0 && step % trainer.save_freq === 0)) await save();
    }
    const result = { steps: step, history, valBefore, valAfter, stoppedBy: stop.signal };
    if (stop.signal) {
      if (savedStep !== step) await save();
      warn(interruptedLine(stop.signal, step, checkpoint));
      return { ...result, checkpoint, seconds: (performance.now() - started) / 1000 };
    }
    const seconds = (performance.now() - started) / 1000;
    log(`${job.name} done in ${seconds.toFixed(0)} s; checkpoint ${checkpoint}`);
    return { ...result, checkpoint, seconds };
  } finally {
    stop.dispose();
    releaseLock();
  }
}
