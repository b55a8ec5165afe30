// The page's starting model: the default job's warm-started actor, shipped with the static build in warm-start/
// (written by `node tools/demo-checkpoint.js`). Fetched once; each run uploads it to that run's device with the
// same Hugging Face directory parsers the Node trainer uses (models/model-files.ts).
import type { Engine } from '../../engine/index.ts';
import { modelFromFiles } from '../../models/model-files.ts';
import { SINGLE_FILE } from '../../models/safetensors.ts';
import { WARM_START_RECORD_FILE, type WarmStartRecord } from '../../ppo/tasks/default-job.ts';
import { builtinTokenizer } from '../../ppo/jobs/builtin-run.ts';
import { BUILTIN_TASKS } from '../../ppo/tasks/builtin-tasks.ts';
import type { ModelWeights } from '../../ppo/trainer.ts';

/** Where the checkpoint lies beside the page, and in the repository (what `node train.js` is given). */
export const SHIPPED_CHECKPOINT_URL = 'warm-start';
export const SHIPPED_CHECKPOINT_PATH = 'demo/public/warm-start';

export interface ShippedCheckpoint {
  record: WarmStartRecord;
  /** A fresh copy of the actor on `engine`. */
  upload(engine: Engine): ModelWeights;
}

async function fetchOk(file: string): Promise<Response> {
  const response = await fetch(`${SHIPPED_CHECKPOINT_URL}/${file}`);
  if (!response.ok)
    throw new Error(
      `${SHIPPED_CHECKPOINT_URL}/${file}: HTTP ${response.status} (the static build lacks the shipped checkpoint: ` +
        `run \`node tools/demo-checkpoint.js\`, then build again)`,
    );
  return response;
}

export async function fetchShippedCheckpoint(): Promise<ShippedCheckpoint> {
  const [config, safetensors, tokenizerJson, record] = await Promise.all([
    fetchOk('config.json').then((r) => r.json()),
    fetchOk(SINGLE_FILE).then((r) => r.arrayBuffer()),
    fetchOk('tokenizer.json').then((r) => r.text()),
    fetchOk(WARM_START_RECORD_FILE).then((r) => r.json() as Promise<WarmStartRecord>),
  ]);
  // The run tokenizes with the built-in task's tokenizer: a checkpoint made with another vocabulary is stale.
  if (tokenizerJson !== builtinTokenizer(BUILTIN_TASKS.arithmetic).files['tokenizer.json']) {
    throw new Error(
      `${SHIPPED_CHECKPOINT_URL}/tokenizer.json differs from the arithmetic task's tokenizer: the shipped checkpoint ` +
        `is stale, run \`node tools/demo-checkpoint.js\` again`,
    );
  }
  const bytes = new Uint8Array(safetensors);
  return { record, upload: (engine) => modelFromFiles(engine, { config, safetensors: bytes }, SHIPPED_CHECKPOINT_URL) };
}
