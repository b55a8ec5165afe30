// Node side of ppo/data/dataset.ts: reads data.train_files / data.val_files (one path or a list, "~" expanded as
// verl does) in order, Parquet or JSONL by extension, and builds the dataset from their rows.
import { readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { resolve } from 'node:path';
import {
  buildRlDataset,
  parseJsonl,
  readParquet,
  type RlDataset,
  type RlDatasetOptions,
  type RlRecord,
} from './dataset.ts';

export function expandPath(path: string): string {
  return resolve(path.replace(/^~(?=$|\/)/, homedir()));
}

export async function readRlRecords(files: string | readonly string[]): Promise<RlRecord[]> {
  const records: RlRecord[] = [];
  for (const file of typeof files === 'string' ? [files] : files) {
    const path = expandPath(file);
    let bytes: Buffer;
    try {
      bytes = await readFile(path);
    } catch (err) {
      throw new Error(
        `data file ${file}: cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      );
    }
    if (path.endsWith('.parquet')) {
      records.push(
        ...(await readParquet(
          bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer,
          file,
        )),
      );
    } else if (path.endsWith('.jsonl')) {
      records.push(...parseJsonl(bytes.toString('utf8'), file));
    } else {
      throw new Error(`data file ${file}: expected a .parquet or .jsonl file`);
    }
  }
  return records;
}

export async function loadRlDataset(files: string | readonly string[], options: RlDatasetOptions): Promise<RlDataset> {
  const records = await readRlRecords(files);
  const names = typeof files === 'string' ? files : files.join(', ');
  if (records.length === 0)
    throw new Error(
      `data file ${names}: no rows (expected one JSON object per line, or Parquet rows, in verl's schema)`,
    );
  try {
    return await buildRlDataset(records, options);
  } catch (err) {
    // Row errors already name their file and line; only the dataset-wide one needs the files added.
    if ((err as Error).message.startsWith('no prompts left'))
      throw new Error(`data file ${names}: ${(err as Error).message}`, { cause: err });
    throw err;
  }
}
