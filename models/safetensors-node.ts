// Node file access for safetensors checkpoints: a file handle per file, the header read and validated
// first, then each tensor's byte range on demand, so a multi-GB checkpoint never sits in one JS buffer.
// Sharded checkpoints (model.safetensors.index.json) are read and written the way transformers does.

import { open, readFile, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import {
  type SafetensorsHeader,
  type TensorInfo,
  type TensorData,
  type TensorToWrite,
  type SafetensorsDtype,
  SafetensorsError,
  readHeaderLength,
  parseHeader,
  decodeTensor,
  encodeHeader,
  encodeTensorData,
  planShards,
  parseShardIndex,
  SINGLE_FILE,
  INDEX_FILE,
  DEFAULT_MAX_SHARD_BYTES,
} from './safetensors.ts';
import { exists } from './fs-node.ts';

/** Largest single read: Node caps one read call near 2 GiB. */
const READ_CHUNK = 1 << 30;

async function readExactly(handle: FileHandle, into: Uint8Array, position: number, file: string): Promise<void> {
  let done = 0;
  while (done < into.length) {
    const { bytesRead } = await handle.read(into, done, Math.min(READ_CHUNK, into.length - done), position + done);
    if (bytesRead === 0)
      throw new SafetensorsError(
        `${file}: file ended at byte ${position + done} while ${into.length - done} more were expected (truncated?)`,
      );
    done += bytesRead;
  }
}

/** One open .safetensors file. Close it when done. */
export class SafetensorsFile {
  private readonly byName: Map<string, TensorInfo>;

  private constructor(
    readonly path: string,
    private readonly handle: FileHandle,
    readonly header: SafetensorsHeader,
  ) {
    this.byName = new Map(header.tensors.map((t) => [t.name, t]));
  }

  static async open(path: string): Promise<SafetensorsFile> {
    const handle = await open(path, 'r');
    try {
      const { size } = await handle.stat();
      const first8 = new Uint8Array(Math.min(8, size));
      await readExactly(handle, first8, 0, path);
      const n = readHeaderLength(first8, size, path);
      const headerBytes = new Uint8Array(n);
      await readExactly(handle, headerBytes, 8, path);
      return new SafetensorsFile(path, handle, parseHeader(headerBytes, size, path));
    } catch (err) {
      await handle.close();
      throw err;
    }
  }

  info(name: string): TensorInfo | undefined {
    return this.byName.get(name);
  }

  async read(name: string): Promise<TensorData> {
    const info = this.byName.get(name);
    if (!info) throw new SafetensorsError(`${this.path}: no tensor '${name}'`);
    const bytes = new Uint8Array(info.end - info.begin);
    await readExactly(this.handle, bytes, this.header.dataOffset + info.begin, this.path);
    return decodeTensor(info, bytes, this.path);
  }

  close(): Promise<void> {
    return this.handle.close();
  }
}

/** All tensors of a checkpoint directory, single-file or sharded, behind one name → tensor lookup. */
export class CheckpointTensors {
  private constructor(
    readonly dir: string,
    private readonly files: SafetensorsFile[],
    private readonly byName: Map<string, SafetensorsFile>,
  ) {}

  static async open(dir: string): Promise<CheckpointTensors> {
    const indexPath = join(dir, INDEX_FILE);
    if (await exists(indexPath)) return CheckpointTensors.openSharded(dir, indexPath);
    const single = join(dir, SINGLE_FILE);
    if (!(await exists(single))) throw new SafetensorsError(`${dir}: neither ${SINGLE_FILE} nor ${INDEX_FILE} found`);
    const file = await SafetensorsFile.open(single);
    return new CheckpointTensors(dir, [file], new Map(file.header.tensors.map((t) => [t.name, file])));
  }

  private static async openSharded(dir: string, indexPath: string): Promise<CheckpointTensors> {
    const index = parseShardIndex(await readFile(indexPath, 'utf8'), indexPath);
    const shardNames = [...new Set(index.weightMap.values())];
    for (const shard of shardNames) {
      if (!(await exists(join(dir, shard)))) {
        const example = [...index.weightMap].find(([, s]) => s === shard)![0];
        throw new SafetensorsError(
          `${indexPath}: tensor '${example}' is mapped to shard ${shard}, which does not exist in ${dir}`,
        );
      }
    }
    const files: SafetensorsFile[] = [];
    try {
      const byName = new Map<string, SafetensorsFile>();
      for (const shard of shardNames) {
        const file = await SafetensorsFile.open(join(dir, shard));
        files.push(file);
        for (const t of file.header.tensors) {
          const earlier = byName.get(t.name);
          if (earlier)
            throw new SafetensorsError(`${dir}: tensor '${t.name}' appears in both ${earlier.path} and ${file.path}`);
          const mapped = index.weightMap.get(t.name);
          if (mapped !== shard) {
            throw new SafetensorsError(
              `${file.path}: holds tensor '${t.name}', which ${INDEX_FILE} ` +
                `${mapped ? `maps to ${mapped}` : 'does not list'}`,
            );
          }
          byName.set(t.name, file);
        }
      }
      for (const [name, shard] of index.weightMap) {
        if (!byName.has(name))
          throw new SafetensorsError(`${indexPath}: tensor '${name}' is mapped to ${shard}, which does not contain it`);
      }
      return new CheckpointTensors(dir, files, byName);
    } catch (err) {
      await Promise.all(files.map((f) => f.close()));
      throw err;
    }
  }

  /** Tensor names in file order. */
  names(): string[] {
    return this.files.flatMap((f) => f.header.tensors.map((t) => t.name));
  }

  info(name: string): TensorInfo | undefined {
    return this.byName.get(name)?.info(name);
  }

  /** The file holding tensor `name` (a shard of a sharded checkpoint). */
  fileOf(name: string): string | undefined {
    return this.byName.get(name)?.path;
  }

  read(name: string): Promise<TensorData> {
    const file = this.byName.get(name);
    if (!file) throw new SafetensorsError(`${this.dir}: checkpoint has no tensor '${name}'`);
    return file.read(name);
  }

  async close(): Promise<void> {
    await Promise.all(this.files.map((f) => f.close()));
  }
}

/** A tensor to save whose data may be produced on demand (e.g. read back from the GPU one at a time). */
export interface TensorSource {
  name: string;
  shape: readonly number[];
  dtype?: SafetensorsDtype;
  data: TensorData | (() => TensorData | Promise<TensorData>);
}

export interface WriteTensorsOptions {
  /** Shard above this many bytes of tensor data (transformers' default: 5 GB). */
  maxShardBytes?: number;
  metadata?: Record<string, string> | null;
}

async function writeAll(handle: FileHandle, bytes: Uint8Array): Promise<void> {
  for (let done = 0; done < bytes.length; ) {
    const { bytesWritten } = await handle.write(bytes, done, Math.min(READ_CHUNK, bytes.length - done));
    done += bytesWritten;
  }
}

/** Writes one .safetensors file, fsynced, the bytes safetensorsChunks gives: the header, then each tensor, produced
 *  when its turn comes. Holds one tensor's bytes at a time, none for float32 and int32 data (written from the arrays
 *  themselves). */
export async function writeSafetensorsFile(
  path: string,
  tensors: readonly TensorSource[],
  metadata?: Record<string, string> | null,
): Promise<void> {
  const handle = await open(path, 'w');
  try {
    await writeAll(
      handle,
      encodeHeader(
        tensors.map((t) => ({ name: t.name, shape: t.shape, dtype: t.dtype ?? 'F32' })),
        metadata,
      ),
    );
    for (const source of tensors) {
      const data = typeof source.data === 'function' ? await source.data() : source.data;
      const t: TensorToWrite = { name: source.name, shape: source.shape, dtype: source.dtype, data };
      await writeAll(handle, encodeTensorData(t));
    }
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Writes model.safetensors, or shards plus model.safetensors.index.json, into dir (which must exist), each
 * file fsynced. Holds one tensor's bytes at a time. Returns the file names written.
 */
export async function writeCheckpointTensors(
  dir: string,
  tensors: readonly TensorSource[],
  options: WriteTensorsOptions = {},
): Promise<string[]> {
  const byName = new Map(tensors.map((t) => [t.name, t]));
  if (byName.size !== tensors.length) {
    const dup = tensors.find((t, i) => tensors.findIndex((u) => u.name === t.name) !== i)!;
    throw new SafetensorsError(`${dir}: tensor '${dup.name}' is given more than once`);
  }
  const plan = planShards(
    tensors.map((t) => ({ name: t.name, shape: t.shape, dtype: t.dtype ?? 'F32' })),
    options.maxShardBytes ?? DEFAULT_MAX_SHARD_BYTES,
  );
  const written: string[] = [];
  for (const shard of plan.shards) {
    await writeSafetensorsFile(
      join(dir, shard.file),
      shard.tensors.map((layout) => ({ ...byName.get(layout.name)!, dtype: layout.dtype })),
      options.metadata,
    );
    written.push(shard.file);
  }
  if (plan.indexJson !== null) {
    const handle = await open(join(dir, INDEX_FILE), 'w');
    try {
      await writeAll(handle, new TextEncoder().encode(plan.indexJson));
      await handle.sync();
    } finally {
      await handle.close();
    }
    written.push(INDEX_FILE);
  }
  return written;
}
