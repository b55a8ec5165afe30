// Run checkpoints: trainer.default_local_dir/global_step_N/{actor,critic} as complete Hugging Face directories
// (the critic as *ForTokenClassification, usable as critic.model.path of a later run), their AdamW states, the
// reference model when it cannot be reloaded from actor_rollout_ref.model.path (the built-in model),
// trainer_state.json (step, RNG, KL coefficient, data cursor) and, for rollout.mode=async, prefetched_batch.json (the
// batch generated for the next step, which the RNG and data cursor are already past). A step directory is assembled
// under a temporary name and renamed into place, so an interrupted save never leaves a half checkpoint;
// trainer.max_actor_ckpt_to_keep prunes old ones. With LoRA, actor/ holds the (unchanged) base model, its
// lora_adapter/ the adapters in PEFT's format and optimizer.safetensors their AdamW state, as verl saves them;
// actor_rollout_ref.model.lora_save_merged adds actor/lora_merged/, the merged model as a plain HF directory. Critic
// LoRA likewise: critic/ the frozen base, critic/lora_adapter/ the adapters and the trained score (modules_to_save).
import { readFile, rm, writeFile, access } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Arena, Engine } from '../../engine/index.ts';
import { loadModel, saveModel, type SaveModelOptions } from '../../models/model-files-node.ts';
import {
  ADAPTER_WEIGHTS_FILE,
  LORA_ADAPTER_DIR,
  loadLoraAdapter,
  saveLoraAdapter,
  saveMergedModel,
} from '../../models/lora-files-node.ts';
import type { DecoderConfig } from '../../models/hf-config.ts';
import type { PpoTrainer, TrainerSnapshot, ModelWeights, SavedPrefetchedBatch } from '../trainer.ts';
import type { DataCursor } from '../data/dataset.ts';
import {
  actorLoraSettings,
  criticLoraSettings,
  weightDtype,
  frozenStorage,
  actorBaseStorage,
  actorUsesLora,
  type PpoConfig,
} from '../config.ts';
import { headEntries } from '../../models/parameter-layout.ts';
import { describeLoraSettings, sameLoraSettings } from '../../models/lora.ts';
import type { LoraAdapters } from '../../models/lora-adapters.ts';
import { decodeOptimizerState } from '../training/optimizer-state.ts';
import { writeOptimizerState } from '../training/optimizer-state-node.ts';
import { withFileContext } from '../config/user-error.ts';
import { CheckpointError, openHfCheckpoint } from '../../models/checkpoint-io-node.ts';
import { SafetensorsFile } from '../../models/safetensors-node.ts';
import { exists, replaceFile } from '../../models/fs-node.ts';
import { stepDirectories, stepDirectory, writeStepDirectory } from './step-directory-node.ts';

/** Inside actor/: the merged model (the PEFT adapter is models/lora-files-node.ts LORA_ADAPTER_DIR). */
export const LORA_MERGED_DIR = 'lora_merged';
const STATE_FILE = 'trainer_state.json';
const PREFETCHED_BATCH_FILE = 'prefetched_batch.json';

async function writeTokenizerFiles(dir: string, files: Record<string, string>): Promise<void> {
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
}

export async function saveModelWithTokenizer(
  engine: Engine,
  dir: string,
  config: DecoderConfig,
  params: Arena,
  tokenizerFiles: Record<string, string>,
  saveDtype: PpoConfig['trainer']['save_dtype'],
  generationConfig?: Record<string, unknown>,
): Promise<void> {
  await saveModel(engine, dir, config, params, saveOptions(saveDtype, generationConfig));
  await writeTokenizerFiles(dir, tokenizerFiles);
}

function saveOptions(
  saveDtype: PpoConfig['trainer']['save_dtype'],
  generationConfig?: Record<string, unknown>,
): SaveModelOptions {
  return { dtype: saveDtype === 'auto' ? undefined : saveDtype, generationConfig };
}

export interface SaveCheckpointOptions {
  /** The actor directory's generation_config.json, written back as read (else one from config.json). */
  generationConfig?: Record<string, unknown>;
  /** Called when the complete checkpoint is about to be renamed into place (a stop signal then waits for it). */
  beforeRename?: () => void;
}

export async function saveCheckpoint(
  engine: Engine,
  runDir: string,
  trainer: PpoTrainer,
  tokenizerFiles: Record<string, string>,
  cursor: DataCursor,
  options: SaveCheckpointOptions = {},
): Promise<string> {
  const snapshot = await trainer.snapshot();
  const target = await writeStepDirectory(
    runDir,
    snapshot.state.globalStep,
    (staging) => writeCheckpoint(engine, staging, trainer, snapshot, tokenizerFiles, cursor, options.generationConfig),
    options.beforeRename,
  );
  await pruneCheckpoints(runDir, trainer.config.trainer.max_actor_ckpt_to_keep);
  return target;
}

async function writeCheckpoint(
  engine: Engine,
  staging: string,
  trainer: PpoTrainer,
  snapshot: TrainerSnapshot,
  tokenizerFiles: Record<string, string>,
  cursor: DataCursor,
  generationConfig: Record<string, unknown> | undefined,
): Promise<void> {
  await saveModelWithTokenizer(
    engine,
    join(staging, 'actor'),
    trainer.actor.config,
    trainer.actor.params,
    tokenizerFiles,
    trainer.config.trainer.save_dtype,
    generationConfig,
  );
  await writeOptimizerState(join(staging, 'actor', 'optimizer.safetensors'), snapshot.actorOptimizer);
  const lora = trainer.actorLora;
  if (lora) {
    await saveLoraAdapter(join(staging, 'actor', LORA_ADAPTER_DIR), lora, trainer.config.actor_rollout_ref.model.path);
    if (trainer.config.actor_rollout_ref.model.lora_save_merged) {
      const merged = join(staging, 'actor', LORA_MERGED_DIR);
      await saveMergedModel(
        engine,
        merged,
        trainer.actor.params,
        lora,
        saveOptions(trainer.config.trainer.save_dtype, generationConfig),
      );
      await writeTokenizerFiles(merged, tokenizerFiles);
    }
  }
  if (trainer.critic) {
    await saveModelWithTokenizer(
      engine,
      join(staging, 'critic'),
      trainer.critic.config,
      trainer.critic.params,
      tokenizerFiles,
      trainer.config.trainer.save_dtype,
    );
    if (snapshot.criticOptimizer)
      await writeOptimizerState(join(staging, 'critic', 'optimizer.safetensors'), snapshot.criticOptimizer);
    // Critic LoRA: critic/ holds the frozen base (its score as loaded), critic/lora_adapter/ the adapters and the
    // trained score (PEFT's modules_to_save), as PeftModel.save_pretrained writes a LoRA token classifier.
    if (trainer.criticLora)
      await saveLoraAdapter(
        join(staging, 'critic', LORA_ADAPTER_DIR),
        trainer.criticLora,
        trainer.config.critic.model.path,
      );
  }
  const reference = trainer.referenceParams;
  if (reference && trainer.config.actor_rollout_ref.model.path === null) {
    await saveModelWithTokenizer(
      engine,
      join(staging, 'reference'),
      trainer.actor.config,
      reference,
      tokenizerFiles,
      trainer.config.trainer.save_dtype,
      generationConfig,
    );
  }
  // Named in trainer_state.json only when there is one, so a sync run's checkpoint keeps its format and a copy that
  // lost the file is found by checkpointProblem.
  if (snapshot.prefetched)
    await writeFile(join(staging, PREFETCHED_BATCH_FILE), `${JSON.stringify(snapshot.prefetched)}\n`);
  const modelPath = trainer.config.actor_rollout_ref.model.path;
  const state: CheckpointState = {
    ...snapshot.state,
    dataCursor: cursor,
    ...(modelPath !== null && { modelPath: resolve(modelPath) }),
    finalValidationDone: false,
    ...(snapshot.prefetched && { prefetchedBatch: PREFETCHED_BATCH_FILE }),
  };
  await writeFile(join(staging, STATE_FILE), `${JSON.stringify(state, null, 2)}\n`);
}

/** trainer_state.json: the trainer's state at the step, where the data stream stands, whether the run's final
 *  validation finished after this checkpoint was saved (absent in checkpoints of older versions), and the file of the
 *  prefetched batch (rollout.mode=async; absent: none). */
interface CheckpointState extends Record<string, unknown> {
  globalStep: number;
  dataCursor: DataCursor;
  /** actor_rollout_ref.model.path, resolved: a resume with another model is refused (absent: the built-in model). */
  modelPath?: string;
  finalValidationDone?: boolean;
  prefetchedBatch?: string;
}

/** The actor_rollout_ref.model.path a checkpoint's run trained from, resolved; null where it does not say. */
export async function checkpointModelPath(checkpointDir: string): Promise<string | null> {
  const state = JSON.parse(await readFile(join(checkpointDir, STATE_FILE), 'utf8')) as Partial<CheckpointState>;
  return typeof state.modelPath === 'string' ? state.modelPath : null;
}

/** Records in a checkpoint that the run's final validation finished, so the same command has nothing left to do. */
export async function markFinalValidationDone(checkpointDir: string): Promise<void> {
  const file = join(checkpointDir, STATE_FILE);
  await withFileContext(`recording the final validation in ${file}`, async () => {
    const state = JSON.parse(await readFile(file, 'utf8')) as CheckpointState;
    await replaceFile(file, `${JSON.stringify({ ...state, finalValidationDone: true }, null, 2)}\n`);
  });
}

async function pruneCheckpoints(runDir: string, keep: number | null): Promise<void> {
  if (keep === null) return;
  const steps = await stepDirectories(runDir);
  for (const step of steps.slice(0, Math.max(0, steps.length - keep))) {
    await rm(stepDirectory(runDir, step), { recursive: true, force: true });
  }
}

/**
 * The checkpoints trainer.resume_mode may resume, in the order to try them: the run directory's, newest first
 * (auto: an unreadable one falls back to the one before), the one given (resume_path), or none (disable).
 */
export async function checkpointsToResume(config: PpoConfig, runDir: string): Promise<string[]> {
  const mode = config.trainer.resume_mode;
  if (mode === 'disable') return [];
  if (mode === 'resume_path') {
    const path = config.trainer.resume_from_path!;
    try {
      await access(join(path, STATE_FILE));
    } catch {
      throw new Error(`trainer.resume_from_path: ${path} is not a checkpoint (no ${STATE_FILE})`);
    }
    return [path];
  }
  return (await stepDirectories(runDir)).reverse().map((step) => stepDirectory(runDir, step));
}

/**
 * Why a checkpoint cannot be resumed (a save killed by something no process can catch, a full disk, a copy cut
 * short), or null when it is whole: trainer_state.json parses, and every model and optimizer file has a valid header
 * whose tensors fill the file exactly. Headers only: a multi-GB checkpoint is checked in milliseconds.
 */
export async function checkpointProblem(dir: string): Promise<string | null> {
  try {
    const state = JSON.parse(await readFile(join(dir, STATE_FILE), 'utf8')) as Partial<CheckpointState>;
    if (!Number.isInteger(state.globalStep)) return `${join(dir, STATE_FILE)} has no integer globalStep`;
    if (state.prefetchedBatch !== undefined) await readPrefetchedBatch(dir);
    const present = (path: string) =>
      access(path).then(
        () => true,
        () => false,
      );
    const checkHeader = async (file: string) => (await SafetensorsFile.open(file)).close();
    for (const model of ['actor', 'critic', 'reference']) {
      const modelDir = join(dir, model);
      if (model !== 'actor' && !(await present(modelDir))) continue;
      const { tensors } = await openHfCheckpoint(modelDir);
      await tensors.close();
      // A trained model has its AdamW state beside it (a frozen critic has none).
      if (model === 'actor' || (await present(join(modelDir, 'optimizer.safetensors'))))
        await checkHeader(join(modelDir, 'optimizer.safetensors'));
    }
    const adapterDir = join(dir, 'actor', LORA_ADAPTER_DIR);
    if (await present(adapterDir)) await checkHeader(join(adapterDir, ADAPTER_WEIGHTS_FILE));
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

export interface ResumedRun {
  /** Whether the run's final validation finished after this checkpoint; null for checkpoints that do not say. */
  finalValidationDone: boolean | null;
  actor: ModelWeights;
  critic: ModelWeights | null;
  reference: Arena | null;
  snapshot: TrainerSnapshot;
  dataCursor: DataCursor;
}

/**
 * The batch an async run generated for the step after the checkpoint's; one line naming the file when it is not one.
 */
async function readPrefetchedBatch(dir: string): Promise<SavedPrefetchedBatch> {
  const file = join(dir, PREFETCHED_BATCH_FILE);
  let batch: Partial<SavedPrefetchedBatch>;
  try {
    batch = JSON.parse(await readFile(file, 'utf8'));
  } catch (err) {
    throw new Error(`resume: cannot read ${file} (${(err as Error).message})`);
  }
  if (
    !Array.isArray(batch.records) ||
    !Number.isInteger(batch.seed) ||
    !Number.isInteger(batch.weightVersion) ||
    !(batch.samples === null || Array.isArray(batch.samples))
  ) {
    throw new Error(`resume: ${file} is not a prefetched batch (expected records, seed, weightVersion and samples)`);
  }
  return batch as SavedPrefetchedBatch;
}

/** The resumed step trains on the batch's samples as they are: refused, before the run directory is touched, when
 *  they are not rollout.n per prompt or are longer than data.max_response_length. */
function checkPrefetchedBatchFits(dir: string, batch: SavedPrefetchedBatch, config: PpoConfig): SavedPrefetchedBatch {
  const { records, samples } = batch;
  const n = config.actor_rollout_ref.rollout.n,
    maxLength = config.data.max_response_length;
  if (samples && (samples.length !== records.length * n || samples.some((s) => s.tokens.length > maxLength))) {
    throw new CheckpointError(
      `resume: ${join(dir, PREFETCHED_BATCH_FILE)} holds ${samples.length} samples of ${records.length} prompts, up ` +
        `to ` +
        `${Math.max(...samples.map((s) => s.tokens.length))} tokens each, but this run has ` +
        `actor_rollout_ref.rollout.n=${n} and ` +
        `data.max_response_length=${maxLength} — resume with the values of the run that saved it, or ` +
        `trainer.resume_mode=disable`,
    );
  }
  return batch;
}

async function readOptimizer(file: string, params: Arena) {
  return decodeOptimizerState(new Uint8Array(await readFile(file)), file, params.layout.slots);
}

/** The critic's LoRA adapters and score from critic/lora_adapter/, checked against critic.model's LoRA keys as the
 *  actor's are; null when neither the checkpoint nor the config has critic LoRA. */
async function criticAdapters(
  engine: Engine,
  dir: string,
  config: PpoConfig,
  criticConfig: DecoderConfig,
): Promise<LoraAdapters | null> {
  const adapterDir = join(dir, 'critic', LORA_ADAPTER_DIR);
  const hasAdapter = await exists(adapterDir);
  const configured = criticLoraSettings(config);
  if (hasAdapter !== (configured !== null))
    throw new CheckpointError(
      hasAdapter
        ? `resume: the checkpoint ${dir} trained critic LoRA adapters (critic/${LORA_ADAPTER_DIR}) but ` +
            `critic.model.lora_rank=0 — set lora_rank as that run did, or trainer.resume_mode=disable`
        : `resume: the checkpoint ${dir} trained the whole critic (no critic/${LORA_ADAPTER_DIR}) but ` +
            `critic.model.lora_rank=${config.critic.model.lora_rank} — drop it, or trainer.resume_mode=disable`,
    );
  if (!configured) return null;
  const lora = await loadLoraAdapter(engine, adapterDir, criticConfig, 'critic', headEntries(criticConfig));
  if (!sameLoraSettings(lora.settings, configured))
    throw new CheckpointError(
      `resume: the checkpoint ${dir} has critic LoRA adapters with ${describeLoraSettings(lora.settings)}; ` +
        `critic.model gives ${describeLoraSettings(configured)} — give them as that run did, or ` +
        `trainer.resume_mode=disable`,
    );
  return lora;
}

export async function loadCheckpoint(engine: Engine, dir: string, config: PpoConfig): Promise<ResumedRun> {
  let stateJson: Record<string, unknown>;
  try {
    stateJson = JSON.parse(await readFile(join(dir, STATE_FILE), 'utf8'));
  } catch (err) {
    throw new Error(`resume: cannot read ${join(dir, STATE_FILE)} (${(err as Error).message})`);
  }
  const actorLoaded = await loadModel(engine, join(dir, 'actor'), {
    label: 'actor',
    weightDtype: (dtype) => actorBaseStorage(config, dtype),
  });
  const adapterDir = join(dir, 'actor', LORA_ADAPTER_DIR);
  const hasAdapter = await exists(adapterDir);
  const m = config.actor_rollout_ref.model;
  if (hasAdapter !== actorUsesLora(config)) {
    throw new CheckpointError(
      hasAdapter
        ? `resume: the checkpoint ${dir} trained LoRA adapters (actor/${LORA_ADAPTER_DIR}) but ` +
            `actor_rollout_ref.model.lora_rank=0 — set lora_rank as that run did, or trainer.resume_mode=disable`
        : `resume: the checkpoint ${dir} trained the whole actor (no actor/${LORA_ADAPTER_DIR}) but ` +
            `actor_rollout_ref.model.lora_rank=${m.lora_rank} — drop lora_rank, or trainer.resume_mode=disable`,
    );
  }
  const lora = hasAdapter ? await loadLoraAdapter(engine, adapterDir, actorLoaded.config, 'actor') : null;
  const configured = actorLoraSettings(config);
  if (lora && configured && !sameLoraSettings(lora.settings, configured))
    throw new CheckpointError(
      `resume: the checkpoint ${dir} has LoRA adapters with ${describeLoraSettings(lora.settings)}; ` +
        `actor_rollout_ref.model gives ${describeLoraSettings(configured)} — give them as that run did, or ` +
        `trainer.resume_mode=disable`,
    );
  const actor: ModelWeights = { config: actorLoaded.config, params: actorLoaded.params, lora };
  let critic: ModelWeights | null = null;
  try {
    await access(join(dir, 'critic'));
    const loaded = await loadModel(engine, join(dir, 'critic'), {
      label: 'critic',
      weightDtype: (dtype) => weightDtype(config, 'critic', dtype),
    });
    critic = {
      config: loaded.config,
      params: loaded.params,
      lora: await criticAdapters(engine, dir, config, loaded.config),
    };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  let reference: Arena | null = null;
  const modelPath = config.actor_rollout_ref.model.path;
  // With LoRA the reference is the actor's base weights (the trainer reads them in place).
  if ((config.algorithm.use_kl_in_reward || config.actor_rollout_ref.actor.use_kl_loss) && !actor.lora) {
    const referenceDir = modelPath ?? join(dir, 'reference');
    reference = (
      await loadModel(engine, referenceDir, {
        label: 'reference',
        weightDtype: (dtype) => frozenStorage(config, 'reference', dtype),
      })
    ).params;
  }
  const criticOptimizerFile = join(dir, 'critic', 'optimizer.safetensors');
  let criticOptimizer = null;
  if (critic) {
    try {
      criticOptimizer = await readOptimizer(criticOptimizerFile, critic.lora?.params ?? critic.params);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
  return {
    finalValidationDone: typeof stateJson.finalValidationDone === 'boolean' ? stateJson.finalValidationDone : null,
    actor,
    critic,
    reference,
    snapshot: {
      state: {
        globalStep: stateJson.globalStep as number,
        rng: stateJson.rng as TrainerSnapshot['state']['rng'],
        klCoef: stateJson.klCoef as number,
      },
      actorOptimizer: await readOptimizer(
        join(dir, 'actor', 'optimizer.safetensors'),
        actor.lora?.params ?? actor.params,
      ),
      criticOptimizer,
      prefetched:
        stateJson.prefetchedBatch === undefined
          ? null
          : checkPrefetchedBatchFits(dir, await readPrefetchedBatch(dir), config),
    },
    dataCursor: stateJson.dataCursor as DataCursor,
  };
}
