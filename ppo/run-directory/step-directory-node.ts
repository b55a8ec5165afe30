// A checkpoint directory (global_step_N) written whole or not at all, by the PPO trainer (checkpoint-node.ts) and
// the supervised jobs (supervised-run-node.ts): assembled in a staging folder named after this process, then renamed
// into place. run-directory-node.ts removes the staging folders of saves that died with their process.
import { mkdir, readdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { withFileContext } from '../config/user-error.ts';

export const STEP_DIR_PREFIX = 'global_step_';
const STEP_DIRECTORY = new RegExp(`^${STEP_DIR_PREFIX}(\\d+)$`);

/** The checkpoint directory of `step`: <run dir>/global_step_N. */
export function stepDirectory(runDir: string, step: number): string {
  return join(runDir, `${STEP_DIR_PREFIX}${step}`);
}

/** The steps of the run directory's global_step_N folders, ascending; none when the directory does not exist. */
export async function stepDirectories(runDir: string): Promise<number[]> {
  let names: string[];
  try {
    names = await readdir(runDir);
  } catch {
    return [];
  }
  return names
    .flatMap((name) => STEP_DIRECTORY.exec(name)?.[1] ?? [])
    .map(Number)
    .sort((a, b) => a - b);
}

/** Where this process assembles the checkpoint of `step` before renaming it into place. */
function stagingDirectory(runDir: string, step: number): string {
  return join(runDir, `.${STEP_DIR_PREFIX}${step}.saving-${process.pid}`);
}

/** A staging folder's name (stagingDirectory's), its process id captured: a save that died with it is removed. */
export const STAGING_DIRECTORY = new RegExp(`^\\.${STEP_DIR_PREFIX}\\d+\\.saving-(\\d+)$`);

/**
 * Writes the checkpoint of `step` whole or not at all: `write` fills a staging folder, which is then renamed to
 * global_step_N (`beforeRename` marks that moment: a stop signal then waits for it). A save killed midway leaves only
 * its staging folder, which the next start removes; a failed one removes it at once and names the checkpoint.
 */
export async function writeStepDirectory(
  runDir: string,
  step: number,
  write: (dir: string) => Promise<void>,
  beforeRename?: () => void,
): Promise<string> {
  const target = stepDirectory(runDir, step);
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
