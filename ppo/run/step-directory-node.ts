// A checkpoint directory (global_step_N) written whole or not at all, by the PPO trainer (checkpoint-node.ts) and
// the supervised jobs (training-job-node.ts): assembled in a staging folder named after this process, then renamed
// into place. run-directory-node.ts removes the staging folders of saves that died with their process.
import { mkdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { withFileContext } from './user-error.ts';

export const STEP_DIR_PREFIX = 'global_step_';

/** Where this process assembles the checkpoint of `step` before renaming it into place (removeStaleSaves' pattern). */
function stagingDirectory(runDir: string, step: number): string {
  return join(runDir, `.${STEP_DIR_PREFIX}${step}.saving-${process.pid}`);
}

/**
 * Writes the checkpoint of `step` whole or not at all: `write` fills a staging folder, which is then renamed to
 * global_step_N (`beforeRename` marks that moment: a stop signal then waits for it). A save killed midway leaves only
 * its staging folder, which the next start removes; a failed one removes it at once and names the checkpoint.
 */
export async function writeStepDirectory(runDir: string, step: number, write: (dir: string) => Promise<void>, beforeRename?: () => void): Promise<string> {
  const target = join(runDir, `${STEP_DIR_PREFIX}${step}`);
  const staging = stagingDirectory(runDir, step);
  try {
    await withFileContext(`saving checkpoint ${target}`, async () => {
      await rm(staging, { recursive: true, force: true });
      await mkdir(staging, { recursive: true });
      await write(staging);
      beforeRename?.();
      await rm(target, { recursive: true, force: true });
      await rename(staging, target);
    });
  } catch (err) {
    await rm(staging, { recursive: true, force: true });
    throw err;
  }
  return target;
}

