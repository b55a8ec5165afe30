// Run checkpoints: trainer.default_local_dir/global_step_N/{actor,critic} as complete Hugging Face directories
// (the critic as *ForTokenClassification, usable as critic.model.path of a later run), plus trainer_state.json
// (step, RNG, KL coefficient, data cursor). The step directory is assembled under a temporary name and renamed
// into place, so an interrupted save never leaves a half checkpoint; trainer.max_*_ckpt_to_keep prunes old ones.
import { mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Engine } from '../engine/index.ts';
import { saveModel } from '../models/model-files-node.ts';
import type { PpoTrainer } from './trainer.ts';
import type { RunSetup } from './run-setup-node.ts';
import type { DataCursor } from './dataset.ts';

export const STEP_DIR_PREFIX = 'global_step_';

async function writeTokenizerFiles(dir: string, files: Record<string, string>): Promise<void> {
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
}

export async function saveCheckpoint(engine: Engine, runDir: string, trainer: PpoTrainer, setup: RunSetup, cursor: DataCursor): Promise<string> {
  const step = trainer.globalStep;
  const target = join(runDir, `${STEP_DIR_PREFIX}${step}`);
  const staging = join(runDir, `.${STEP_DIR_PREFIX}${step}.saving-${process.pid}`);
  await rm(staging, { recursive: true, force: true });
  await mkdir(staging, { recursive: true });
  await saveModel(engine, join(staging, 'actor'), trainer.actor.config, trainer.actor.params);
  await writeTokenizerFiles(join(staging, 'actor'), setup.tokenizerFiles);
  if (trainer.critic) {
    await saveModel(engine, join(staging, 'critic'), trainer.critic.config, trainer.critic.params);
    await writeTokenizerFiles(join(staging, 'critic'), setup.tokenizerFiles);
  }
  await writeFile(join(staging, 'trainer_state.json'), JSON.stringify({ ...trainer.getState(), dataCursor: cursor }, null, 2) + '\n');
  await rm(target, { recursive: true, force: true });
  await rename(staging, target);
  await pruneCheckpoints(runDir, trainer.config.trainer.max_actor_ckpt_to_keep);
  return target;
}

async function pruneCheckpoints(runDir: string, keep: number | null): Promise<void> {
  if (keep === null) return;
  const steps = (await readdir(runDir))
    .filter((name) => name.startsWith(STEP_DIR_PREFIX))
    .map((name) => Number(name.slice(STEP_DIR_PREFIX.length)))
    .filter(Number.isInteger)
    .sort((a, b) => a - b);
  for (const step of steps.slice(0, Math.max(0, steps.length - keep))) {
    await rm(join(runDir, `${STEP_DIR_PREFIX}${step}`), { recursive: true, force: true });
  }
}
