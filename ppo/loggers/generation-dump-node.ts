// Writes verl's generation dumps: DIR/{step}.jsonl, one JSON object per sample (ppo/loggers/generation-records.ts),
// replacing the file of a step that runs again after a resume, as verl's _dump_generations does.
import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { PpoConfig } from '../config.ts';
import type { GenerationDumps, GenerationRecord } from './generation-records.ts';
import { withFileContext } from '../config/user-error.ts';

export async function writeGenerations(
  dir: string,
  step: number,
  records: readonly GenerationRecord[],
): Promise<string> {
  const file = join(dir, `${step}.jsonl`);
  await mkdir(dir, { recursive: true });
  await writeFile(file, `${records.map((r) => JSON.stringify(r)).join('\n')}\n`);
  return file;
}

/**
 * The dumps trainer.rollout_data_dir and trainer.validation_data_dir ask for (relative to the working directory, as in
 * verl).
 */
export function generationDumps(
  trainer: Pick<PpoConfig['trainer'], 'rollout_data_dir' | 'validation_data_dir'>,
): GenerationDumps {
  const to = (key: string, dir: string | null) =>
    dir === null
      ? null
      : async (step: number, records: GenerationRecord[]) => {
          await withFileContext(`trainer.${key}: writing ${join(resolve(dir), `${step}.jsonl`)}`, () =>
            writeGenerations(resolve(dir), step, records),
          );
        };
  return {
    rollout: to('rollout_data_dir', trainer.rollout_data_dir),
    validation: to('validation_data_dir', trainer.validation_data_dir),
  };
}
