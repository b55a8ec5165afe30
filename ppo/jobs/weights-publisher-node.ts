// Publishes the actor's weights for the rollout servers: each version in a directory of its own,
// <rollout_weights_dir>/v<step>, written under a staging name and renamed into place, so a server never reads a
// half-written version. The full model goes in the actor's save dtype with its tokenizer files (an HF directory any
// server loads); with LoRA only the adapter (PEFT files). vLLM reloads full weights only from its launch path, so
// for it `current` is a symbolic link moved atomically to the newest version. Two versions stay on disk: the newest,
// and the one before it, which servers may still be reading while the trainer moves on.
import { mkdir, readdir, rename, rm, symlink } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Engine } from '../../engine/index.ts';
import { saveLoraAdapter } from '../../models/lora-files-node.ts';
import type { PpoConfig } from '../config.ts';
import type { ModelWeights } from '../trainer.ts';
import { saveModelWithTokenizer } from '../run-directory/checkpoint-node.ts';
import { withFileContext } from '../config/user-error.ts';
import type { WeightsPublisher } from '../generation/remote/remote-generation.ts';
import type { RolloutBackend, WeightsVersion } from '../generation/remote/wire-format.ts';

/** The link vLLM is launched with (`vllm serve <rollout_weights_dir>/current`). */
export const CURRENT_LINK = 'current';

const VERSION_DIR = /^v(\d+)$/;

export interface PublisherSource {
  engine: Engine;
  actor: ModelWeights;
  config: PpoConfig;
  tokenizerFiles: Record<string, string>;
  generationConfig?: Record<string, unknown>;
}

export function diskWeightsPublisher(dir: string, backend: RolloutBackend, source: PublisherSource): WeightsPublisher {
  const root = resolve(dir);
  return {
    publish: (version) =>
      withFileContext(`publishing the actor's weights to ${root}`, () => publish(root, backend, source, version)),
  };
}

async function publish(
  root: string,
  backend: RolloutBackend,
  s: PublisherSource,
  version: number,
): Promise<WeightsVersion> {
  await mkdir(root, { recursive: true });
  const target = join(root, `v${version}`);
  const staging = join(root, `.v${version}.writing-${process.pid}`);
  await rm(staging, { recursive: true, force: true });
  const lora = s.actor.lora ?? null;
  if (lora) await saveLoraAdapter(staging, lora, s.config.actor_rollout_ref.model.path);
  else
    await saveModelWithTokenizer(
      s.engine,
      staging,
      s.actor.config,
      s.actor.params,
      s.tokenizerFiles,
      s.config.trainer.save_dtype,
      s.generationConfig,
    );
  // A version published again (a resumed run) replaces the old copy, which no server may keep serving.
  await rm(target, { recursive: true, force: true });
  await rename(staging, target);
  if (backend === 'vllm' && !lora) {
    const link = join(root, `.${CURRENT_LINK}.${process.pid}`);
    await rm(link, { force: true });
    await symlink(`v${version}`, link);
    await rename(link, join(root, CURRENT_LINK));
  }
  for (const name of await readdir(root)) {
    const m = VERSION_DIR.exec(name);
    if (m && Number(m[1]) < version - 1) await rm(join(root, name), { recursive: true, force: true });
  }
  return { version, dir: target, kind: lora ? 'lora' : 'full' };
}
