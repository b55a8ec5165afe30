// safetensors: 8-byte little-endian header length N, N bytes of JSON header
// ({name: {dtype, shape, data_offsets: [begin, end]}, __metadata__?: {string: string}}), then the raw
// little-endian tensor bytes, offsets relative to the end of the header.
// Browser-safe: everything here takes and returns bytes; file access lives in safetensors-node.ts.
import { f32ToBf16Bits, f32ToF16Bits, f16BitsToF32 } from '../engine/half-float.ts';

export type SafetensorsDtype = 'F32' | 'F16' | 'BF16' | 'I32' | 'I64';

export const DTYPE_BYTES: Readonly<Record<SafetensorsDtype, number>> = { F32: 4, F16: 2, BF16: 2, I32: 4, I64: 8 };

// Dtypes the format defines that this engine does not load: named in errors so a user sees "unsupported"
// rather than "unknown" for a legitimate file.
const KNOWN_UNSUPPORTED_DTYPES = new Set([
  'F64',
  'I8',
  'I16',
  'U8',
  'U16',
  'U32',
  'U64',
  'BOOL',
  'F8_E4M3',
  'F8_E5M2',
  'F8_E8M0',
  'F4',
  'F6_E2M3',
  'F6_E3M2',
  'C64',
]);

/** The reference implementation's bound: a larger header is a corrupt or hostile file, not a model. */
export const MAX_HEADER_BYTES = 100_000_000;

export interface TensorInfo {
  name: string;
  dtype: SafetensorsDtype;
  shape: number[];
  /** Byte range relative to the start of the data section (after the header). */
  begin: number;
  end: number;
}

export interface SafetensorsHeader {
  /** Tensors in data order (ascending offsets). */
  tensors: TensorInfo[];
  metadata: Record<string, string> | null;
  /** Absolute file offset of the data section: 8 + header length. */
  dataOffset: number;
}

export type TensorData = Float32Array | Int32Array;

export interface TensorToWrite {
  name: string;
  shape: readonly number[];
  /** Stored dtype; F32 unless asked otherwise. Float data converts with round-to-nearest-even. */
  dtype?: SafetensorsDtype;
  data: TensorData;
}

export class SafetensorsError extends Error {
  override name = 'SafetensorsError';
}

function fail(file: string, what: string): never {
  throw new SafetensorsError(`${file}: ${what}`);
}

// Typed-array views below reinterpret memory in host byte order; safetensors is little-endian.
if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1)
  throw new Error('safetensors: big-endian hosts are not supported');

function isDtype(s: string): s is SafetensorsDtype {
  return Object.hasOwn(DTYPE_BYTES, s);
}

function product(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Reads N from the first 8 bytes and checks it against the file size and MAX_HEADER_BYTES. */
export function readHeaderLength(first8: Uint8Array, fileSize: number, file: string): number {
  if (fileSize < 8 || first8.length < 8)
    fail(file, `file is ${fileSize} bytes, too short for the 8-byte header length`);
  const view = new DataView(first8.buffer, first8.byteOffset, 8);
  const n = Number(view.getBigUint64(0, true));
  if (n > MAX_HEADER_BYTES)
    fail(file, `header length ${n} is above the ${MAX_HEADER_BYTES}-byte bound (corrupt file?)`);
  if (8 + n > fileSize) fail(file, `header length ${n} runs past the end of the ${fileSize}-byte file`);
  if (n < 2) fail(file, `header length ${n} is too short for a JSON object`);
  return n;
}

function parseTensorEntry(file: string, name: string, entry: unknown): TensorInfo {
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry))
    fail(file, `tensor '${name}': header entry is not an object`);
  const e = entry as Record<string, unknown>;
  for (const key of ['dtype', 'shape', 'data_offsets']) {
    if (!(key in e)) fail(file, `tensor '${name}': header entry has no '${key}'`);
  }
  const { dtype, shape, data_offsets: offsets } = e;
  if (typeof dtype !== 'string') fail(file, `tensor '${name}': dtype is ${JSON.stringify(dtype)}, expected a string`);
  if (!isDtype(dtype)) {
    const why = KNOWN_UNSUPPORTED_DTYPES.has(dtype) ? 'unsupported' : 'unknown';
    fail(file, `tensor '${name}': ${why} dtype ${dtype} (supported: ${Object.keys(DTYPE_BYTES).join(', ')})`);
  }
  if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    fail(file, `tensor '${name}': shape ${JSON.stringify(shape)} is not a list of non-negative integers`);
  }
  if (
    !Array.isArray(offsets) ||
    offsets.length !== 2 ||
    !offsets.every((o) => Number.isSafeInteger(o) && o >= 0) ||
    offsets[0] > offsets[1]
  ) {
    fail(file, `tensor '${name}': data_offsets ${JSON.stringify(offsets)} is not [begin, end] with 0 <= begin <= end`);
  }
  const info: TensorInfo = {
    name,
    dtype,
    shape: shape as number[],
    begin: offsets[0] as number,
    end: offsets[1] as number,
  };
  const expected = product(info.shape) * DTYPE_BYTES[dtype];
  if (info.end - info.begin !== expected) {
    fail(
      file,
      `tensor '${name}': ${info.end - info.begin} bytes in data_offsets, but shape [${info.shape.join(', ')}] of ` +
        `${dtype} needs ${expected}`,
    );
  }
  return info;
}

/**
 * Parses and validates the JSON header: every entry well-formed, byte counts matching shapes, and the
 * tensors tiling the data section exactly (contiguous, non-overlapping, nothing past or left at the end).
 */
export function parseHeader(headerBytes: Uint8Array, fileSize: number, file: string): SafetensorsHeader {
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(headerBytes));
  } catch (err) {
    fail(file, `header is not valid UTF-8 JSON (${(err as Error).message})`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) fail(file, 'header is not a JSON object');

  let metadata: Record<string, string> | null = null;
  const tensors: TensorInfo[] = [];
  for (const [name, entry] of Object.entries(json)) {
    if (name === '__metadata__') {
      if (
        typeof entry !== 'object' ||
        entry === null ||
        Array.isArray(entry) ||
        !Object.values(entry).every((v) => typeof v === 'string')
      ) {
        fail(file, '__metadata__ is not a map of strings to strings');
      }
      metadata = entry as Record<string, string>;
      continue;
    }
    tensors.push(parseTensorEntry(file, name, entry));
  }

  const dataOffset = 8 + headerBytes.length;
  const dataSize = fileSize - dataOffset;
  // Zero-byte tensors may share an offset with their neighbour; order them first so the tiling check holds.
  tensors.sort((a, b) => a.begin - b.begin || a.end - b.end);
  let cursor = 0;
  let previous = '';
  for (const t of tensors) {
    if (t.end > dataSize)
      fail(file, `tensor '${t.name}': data_offsets [${t.begin}, ${t.end}] run past the ${dataSize}-byte data section`);
    if (t.begin < cursor)
      fail(
        file,
        `tensor '${t.name}': bytes [${t.begin}, ${t.end}) overlap tensor '${previous}' which ends at ${cursor}`,
      );
    if (t.begin > cursor)
      fail(
        file,
        `tensor '${t.name}': starts at ${t.begin} but the previous tensor${previous ? ` '${previous}'` : ''} ends at ` +
          `${cursor} (offsets must be contiguous)`,
      );
    cursor = t.end;
    previous = t.name;
  }
  if (cursor !== dataSize)
    fail(file, `${dataSize - cursor} bytes after the last tensor are not described by the header`);
  return { tensors, metadata, dataOffset };
}

/** Decodes one tensor's raw bytes: floats to f32 (exact for F16/BF16), integers to i32. */
export function decodeTensor(info: TensorInfo, bytes: Uint8Array, file: string): TensorData {
  if (bytes.length !== info.end - info.begin)
    fail(file, `tensor '${info.name}': got ${bytes.length} bytes, expected ${info.end - info.begin}`);
  const n = product(info.shape);
  // Typed arrays need element alignment and the data section may start at any byte: copy unless the bytes
  // already own their whole buffer (a view would otherwise also pin the rest of a larger buffer).
  const ownsBuffer = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength;
  const aligned = ownsBuffer ? bytes.buffer : new Uint8Array(bytes).buffer;
  switch (info.dtype) {
    case 'F32':
      return new Float32Array(aligned, 0, n);
    case 'I32':
      return new Int32Array(aligned, 0, n);
    case 'F16': {
      const half = new Uint16Array(aligned, 0, n);
      const out = new Float32Array(n);
      for (let i = 0; i < n; i++) out[i] = f16BitsToF32(half[i]);
      return out;
    }
    case 'BF16': {
      const bf = new Uint16Array(aligned, 0, n);
      const out = new Uint32Array(n);
      for (let i = 0; i < n; i++) out[i] = bf[i] << 16;
      return new Float32Array(out.buffer);
    }
    case 'I64': {
      const wide = new BigInt64Array(aligned, 0, n);
      const out = new Int32Array(n);
      for (let i = 0; i < n; i++) {
        const v = wide[i];
        if (v < -2147483648n || v > 2147483647n)
          fail(file, `tensor '${info.name}': I64 element ${i} = ${v} does not fit in i32`);
        out[i] = Number(v);
      }
      return out;
    }
  }
}

/** Parses a whole in-memory file (browser uploads, small checkpoints) into decoded tensors. */
export function parseSafetensors(
  bytes: Uint8Array,
  file = '<bytes>',
): { header: SafetensorsHeader; tensors: Map<string, TensorData> } {
  const n = readHeaderLength(bytes.subarray(0, 8), bytes.length, file);
  const header = parseHeader(bytes.subarray(8, 8 + n), bytes.length, file);
  const tensors = new Map<string, TensorData>();
  for (const t of header.tensors) {
    tensors.set(t.name, decodeTensor(t, bytes.subarray(header.dataOffset + t.begin, header.dataOffset + t.end), file));
  }
  return { header, tensors };
}

// ---- writing ----

/** Entries the header describes: what a writer must know before any tensor data exists. */
export interface TensorLayout {
  name: string;
  shape: readonly number[];
  dtype: SafetensorsDtype;
}

/**
 * The 8-byte length plus the JSON header, padded with spaces to a multiple of 8 as the reference writer does.
 * transformers refuses files whose __metadata__ lacks a known "format", hence the default.
 */
export function encodeHeader(
  tensors: readonly TensorLayout[],
  metadata: Record<string, string> | null = { format: 'pt' },
): Uint8Array {
  const header: Record<string, unknown> = {};
  if (metadata) header.__metadata__ = metadata;
  const seen = new Set<string>();
  let offset = 0;
  for (const t of tensors) {
    if (t.name === '__metadata__' || seen.has(t.name))
      throw new SafetensorsError(`safetensors writer: duplicate or reserved tensor name '${t.name}'`);
    seen.add(t.name);
    const bytes = product(t.shape) * DTYPE_BYTES[t.dtype];
    header[t.name] = { dtype: t.dtype, shape: [...t.shape], data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  const json = new TextEncoder().encode(JSON.stringify(header));
  const padded = Math.ceil(json.length / 8) * 8;
  const out = new Uint8Array(8 + padded).fill(0x20);
  new DataView(out.buffer).setBigUint64(0, BigInt(padded), true);
  out.set(json, 8);
  return out;
}

/** Raw little-endian bytes of one tensor in its stored dtype; F32 from f32 data is a view, not a copy. */
export function encodeTensorData(t: TensorToWrite): Uint8Array {
  const dtype = t.dtype ?? 'F32';
  const n = product(t.shape);
  if (t.data.length !== n)
    throw new SafetensorsError(
      `safetensors writer: tensor '${t.name}' has ${t.data.length} elements, shape [${t.shape.join(', ')}] needs ${n}`,
    );
  const isFloat = t.data instanceof Float32Array;
  if (isFloat !== (dtype === 'F32' || dtype === 'F16' || dtype === 'BF16')) {
    throw new SafetensorsError(
      `safetensors writer: tensor '${t.name}' holds ${isFloat ? 'float' : 'integer'} data but dtype is ${dtype}`,
    );
  }
  const data = t.data;
  switch (dtype) {
    case 'F32':
    case 'I32':
      return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    case 'F16':
    case 'BF16': {
      const convert = dtype === 'F16' ? f32ToF16Bits : f32ToBf16Bits;
      const out = new Uint16Array(n);
      for (let i = 0; i < n; i++) out[i] = convert(data[i]);
      return new Uint8Array(out.buffer);
    }
    case 'I64': {
      const out = new BigInt64Array(n);
      for (let i = 0; i < n; i++) out[i] = BigInt(data[i]);
      return new Uint8Array(out.buffer);
    }
  }
}

/** The pieces of a file in order (header, then each tensor), for streaming writers and `new Blob(...)`. */
export function* safetensorsChunks(
  tensors: readonly TensorToWrite[],
  metadata?: Record<string, string> | null,
): Generator<Uint8Array> {
  yield encodeHeader(
    tensors.map((t) => ({ name: t.name, shape: t.shape, dtype: t.dtype ?? 'F32' })),
    metadata,
  );
  for (const t of tensors) yield encodeTensorData(t);
}

/** A whole file in one buffer: for small checkpoints and tests. */
export function serializeSafetensors(
  tensors: readonly TensorToWrite[],
  metadata?: Record<string, string> | null,
): Uint8Array {
  const chunks = [...safetensorsChunks(tensors, metadata)];
  const out = new Uint8Array(chunks.reduce((s, c) => s + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

// ---- sharded checkpoints: model.safetensors.index.json ----

export const SINGLE_FILE = 'model.safetensors';
export const INDEX_FILE = 'model.safetensors.index.json';
/** transformers' save_pretrained default max_shard_size ("5GB", decimal). */
export const DEFAULT_MAX_SHARD_BYTES = 5_000_000_000;

export interface ShardIndex {
  /** tensor name → shard file name (a bare file name in the same directory). */
  weightMap: Map<string, string>;
  totalSize: number | null;
  metadata: Record<string, unknown>;
}

export function parseShardIndex(text: string, file = INDEX_FILE): ShardIndex {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    fail(file, `not valid JSON (${(err as Error).message})`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) fail(file, 'not a JSON object');
  const { weight_map: map, metadata = {} } = json as Record<string, unknown>;
  if (typeof map !== 'object' || map === null || Array.isArray(map))
    fail(file, `'weight_map' is ${JSON.stringify(map)}, expected an object of tensor name to shard file`);
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata))
    fail(file, `'metadata' is not an object`);
  const weightMap = new Map<string, string>();
  for (const [name, shard] of Object.entries(map)) {
    // A bare name keeps a hostile index from reading outside the checkpoint directory.
    if (typeof shard !== 'string' || shard === '' || /[/\\]/.test(shard) || shard === '.' || shard === '..') {
      fail(
        file,
        `tensor '${name}': weight_map entry ${JSON.stringify(shard)} is not a file name in the checkpoint directory`,
      );
    }
    weightMap.set(name, shard);
  }
  const total = (metadata as Record<string, unknown>).total_size;
  return {
    weightMap,
    totalSize: typeof total === 'number' ? total : null,
    metadata: metadata as Record<string, unknown>,
  };
}

export interface ShardPlan {
  /** File name and its tensors, in write order. */
  shards: { file: string; tensors: TensorLayout[] }[];
  /** The index JSON text when there is more than one shard, else null (a single model.safetensors). */
  indexJson: string | null;
}

/**
 * Splits tensors, in order, into shards of at most maxShardBytes of tensor data (a tensor larger than the
 * limit gets a shard of its own), named as transformers names them.
 */
export function planShards(tensors: readonly TensorLayout[], maxShardBytes = DEFAULT_MAX_SHARD_BYTES): ShardPlan {
  const groups: TensorLayout[][] = [];
  let current: TensorLayout[] = [];
  let currentBytes = 0;
  let totalSize = 0;
  for (const t of tensors) {
    const bytes = product(t.shape) * DTYPE_BYTES[t.dtype];
    if (current.length > 0 && currentBytes + bytes > maxShardBytes) {
      groups.push(current);
      current = [];
      currentBytes = 0;
    }
    current.push(t);
    currentBytes += bytes;
    totalSize += bytes;
  }
  if (current.length > 0 || groups.length === 0) groups.push(current);
  if (groups.length === 1) return { shards: [{ file: SINGLE_FILE, tensors: groups[0] }], indexJson: null };

  const count = String(groups.length).padStart(5, '0');
  const shards = groups.map((g, i) => ({
    file: `model-${String(i + 1).padStart(5, '0')}-of-${count}.safetensors`,
    tensors: g,
  }));
  const weightMap: Record<string, string> = {};
  for (const s of shards) for (const t of s.tensors) weightMap[t.name] = s.file;
  const indexJson = `${JSON.stringify({ metadata: { total_size: totalSize }, weight_map: weightMap }, null, 2)}\n`;
  return { shards, indexJson };
}
