// The per-layer key/value cache of a batch of sequences decoding together. Every sequence shares one slot
// index (prompts are left-padded, so slot j of every row is written in the same step); a key mask with one
// entry per slot says which slots hold real tokens. Rows are sequences and can be dropped (compaction) once
// finished, so a half-finished batch stops paying for its finished rows. For continuous batching a row can
// take a new sequence prefilled elsewhere (`importRows`: its prompt's keys end at the shared slot index,
// earlier slots masked), and `shiftSlots` moves every row's slots left once the shared index nears capacity:
// positions are in the keys already (RoPE before caching), so a slot's index carries no meaning.
// Keys and values are stored in float32 or, for actor_rollout_ref.rollout.dtype=bfloat16|float16, two halves a
// word (rounded to nearest even when written): half the bytes, so twice the sequences in the same memory.
// The rows are kept in groups (decode groups) of tensors of their own, each small enough for one storage binding
// (maxStorageBufferBindingSize, 128 MiB in browsers): a batch is never held to what one binding holds, only to
// memory, and kernels attend group by group (models/incremental-decoder.ts). Where even one row's layer is above a
// binding (a long sequence), each row is a group whose layers are single buffers (up to maxBufferSize) that decode
// attention binds in windows of `windowSlots` slots; compaction, imports and shifts are buffer copies, which no
// binding limits.
import type { Engine, FloatDType, Tensor } from '../engine/index.ts';
import type { DecoderConfig } from './hf-config.ts';
import { kvCacheWrite } from '../kernels/decode/kv-cache-write.ts';

/** Rows [first, first + maxRows) of the cache, in tensors of their own that each fit one storage binding. */
export interface CacheGroup {
  readonly first: number;
  readonly maxRows: number;
  /** Per layer, (maxRows, capacity, NKV·HS) in the cache's dtype: slot j of the group's row b at
   *  (b·capacity + j)·NKV·HS. */
  readonly k: Tensor[];
  readonly v: Tensor[];
  /** (maxRows, capacity): 1 = real token. Slots not yet appended hold 1, so a decode step needs no upload. */
  readonly keyMask: Tensor<'u32'>;
}

export class KvCache {
  /** The rows' groups, `groupRows` rows each (the last may hold fewer); one group when a layer fits a binding. */
  readonly groups: CacheGroup[] = [];
  /** (maxRows, capacity) as the host wrote it; each group's slice is uploaded to its keyMask. */
  private readonly hostMask: Uint32Array;
  /** One group's layer k or v, the staging area of compaction (a buffer cannot be copied onto itself). */
  private readonly compactionScratch: Tensor;
  /** Sequences held, rows [0, rows) of every tensor. */
  rows = 0;
  /** Slots filled, the same for every row. */
  length = 0;

  constructor(
    readonly engine: Engine,
    readonly config: DecoderConfig,
    readonly maxRows: number,
    readonly capacity: number,
    readonly dtype: FloatDType = 'f32',
    /** Rows per group (models/incremental-decoder.ts decodeGroupRows); all rows in one group when absent. */
    readonly groupRows: number = maxRows,
    /** Slots per cache window where one row's layer is above a binding (models/incremental-decoder.ts
     *  cacheWindowSlots; groups of one row): decode steps bind its layers a window at a time. Null: they bind whole. */
    readonly windowSlots: number | null = null,
  ) {
    if (dtype !== 'f32' && this.kvWidth % 4 !== 0) {
      throw new Error(
        `KvCache: a ${dtype} cache needs num_key_value_heads·head_dim = ${this.kvWidth} to be a multiple of 4 ` +
          '(set actor_rollout_ref.rollout.dtype=float32)',
      );
    }
    if (!Number.isInteger(groupRows) || groupRows < 1)
      throw new Error(`KvCache: ${groupRows} rows per group, expected a whole number of at least 1`);
    for (let first = 0; first < maxRows; first += groupRows) {
      const rows = Math.min(groupRows, maxRows - first);
      const name = (what: string) =>
        first === 0 && rows === maxRows ? `kv-cache.${what}` : `kv-cache.rows${first}.${what}`;
      const group: CacheGroup = {
        first,
        maxRows: rows,
        k: [],
        v: [],
        keyMask: engine.tensor(name('keyMask'), [rows, capacity], 'u32'),
      };
      for (let l = 0; l < config.numLayers; l++) {
        group.k.push(engine.tensor(name(`layer${l}.k`), [rows, capacity, this.kvWidth], dtype));
        group.v.push(engine.tensor(name(`layer${l}.v`), [rows, capacity, this.kvWidth], dtype));
      }
      this.groups.push(group);
    }
    this.hostMask = new Uint32Array(maxRows * capacity);
    this.compactionScratch = engine.tensor(
      'kv-cache.compaction',
      [Math.min(groupRows, maxRows) * capacity * this.kvWidth],
      dtype,
    );
  }

  get kvWidth(): number {
    return this.config.numKvHeads * this.config.headDim;
  }

  /** The groups holding rows, each with its rows held. */
  held(): { group: CacheGroup; rows: number }[] {
    return this.groups.flatMap((group) =>
      group.first < this.rows ? [{ group, rows: Math.min(group.maxRows, this.rows - group.first) }] : [],
    );
  }

  /** The group of row `row` and the row's index in it. */
  private locate(row: number): { group: CacheGroup; local: number } {
    const group = this.groups[Math.floor(row / this.groupRows)];
    return { group, local: row - group.first };
  }

  /** Sends the host mask of every group holding rows (a group's slice, whole). */
  private uploadMask(): void {
    for (const { group } of this.held()) {
      const at = group.first * this.capacity;
      this.engine.upload(group.keyMask, this.hostMask.subarray(at, at + group.maxRows * this.capacity));
    }
  }

  /** Empties the cache for a new batch of `rows` sequences; `length` slots start filled and masked out. */
  reset(rows: number, length = 0): void {
    if (!Number.isInteger(rows) || rows < 1 || rows > this.maxRows) {
      throw new Error(
        `KvCache.reset: ${rows} rows, expected 1..${this.maxRows} (the cache was made for ${this.maxRows})`,
      );
    }
    if (!Number.isInteger(length) || length < 0 || length > this.capacity)
      throw new Error(`KvCache.reset: length ${length} outside [0, ${this.capacity}]`);
    this.rows = rows;
    this.length = length;
    this.hostMask.fill(1);
    for (let b = 0; b < rows; b++) this.hostMask.fill(0, b * this.capacity, b * this.capacity + length);
    this.uploadMask();
  }

  /** Adds `count` empty rows after the held ones (their filled slots masked out), for `importRows` to fill. */
  addRows(count: number): void {
    if (!Number.isInteger(count) || count < 0 || this.rows + count > this.maxRows) {
      throw new Error(`KvCache.addRows: ${count} rows to ${this.rows}, expected at most ${this.maxRows} in all`);
    }
    for (let b = this.rows; b < this.rows + count; b++)
      this.hostMask.fill(0, b * this.capacity, b * this.capacity + this.length);
    this.rows += count;
    if (count > 0) this.uploadMask();
  }

  /**
   * Replaces rows with sequences prefilled in `source`: slots [0, source.length) of source row `from` go to
   * slots [length − source.length, length) of row `to`, with their mask; the row's earlier slots leave
   * attention. The next decode step then appends to the new sequence as to every other row.
   */
  importRows(source: KvCache, moves: readonly { from: number; to: number }[]): void {
    const width = source.length;
    const at = this.length - width;
    if (at < 0)
      throw new Error(`KvCache.importRows: ${width} prefilled slots do not fit before the shared index ${this.length}`);
    const span = width * this.kvWidth;
    const slots = (t: Tensor, row: number, capacity: number, first: number) =>
      t.view(`${t.name}[${row}, ${first}:${first + width}]`, (row * capacity + first) * this.kvWidth, [span]);
    for (const { from, to } of moves) {
      if (!(from >= 0 && from < source.rows && to >= 0 && to < this.rows)) {
        throw new Error(`KvCache.importRows: row ${from} of ${source.rows} into row ${to} of ${this.rows}`);
      }
      const s = source.locate(from);
      const d = this.locate(to);
      for (let l = 0; l < this.config.numLayers; l++) {
        this.engine.copy(
          slots(s.group.k[l], s.local, source.capacity, 0),
          slots(d.group.k[l], d.local, this.capacity, at),
        );
        this.engine.copy(
          slots(s.group.v[l], s.local, source.capacity, 0),
          slots(d.group.v[l], d.local, this.capacity, at),
        );
      }
      const row = to * this.capacity;
      this.hostMask.fill(0, row, row + at);
      this.hostMask.set(source.hostMask.subarray(from * source.capacity, from * source.capacity + width), row + at);
      this.hostMask.fill(1, row + this.length, row + this.capacity);
    }
    if (moves.length > 0) this.uploadMask();
  }

  /** Moves slots [by, length) of every row to [0, length − by); the caller knows no row attends slots below `by`. */
  shiftSlots(by: number): void {
    if (!Number.isInteger(by) || by < 0 || by > this.length)
      throw new Error(`KvCache.shiftSlots: ${by} outside [0, ${this.length}]`);
    if (by === 0) return;
    // One copy per tensor: row b's slot j lands at slot j − by of the same row; slots that wrap into the
    // previous row's tail are past the shared index, overwritten before anything attends them.
    for (const { group, rows } of this.held()) {
      const moved = rows * this.capacity * this.kvWidth - by * this.kvWidth;
      const scratch = this.compactionScratch.view(`${this.compactionScratch.name}[shift]`, 0, [moved]);
      for (const layer of [...group.k, ...group.v]) {
        this.engine.copy(layer.view(`${layer.name}[shift]`, by * this.kvWidth, [moved]), scratch);
        this.engine.copy(scratch, layer.view(layer.name, 0, [moved]));
      }
    }
    for (let b = 0; b < this.rows; b++) {
      const row = b * this.capacity;
      this.hostMask.copyWithin(row, row + by, row + this.length);
      this.hostMask.fill(1, row + this.length - by, row + this.capacity);
    }
    this.uploadMask();
    this.length -= by;
  }

  /**
   * Reserves the next T slots of every row and returns the first. `mask` (rows, T) marks padding inside the
   * block (left-padded prompts, rows without observation tokens); null means every slot is a real token.
   */
  reserve(T: number, mask: ArrayLike<number> | null): number {
    const start = this.length;
    if (start + T > this.capacity) {
      throw new Error(
        `KvCache: appending ${T} slots to ${start} overruns its capacity of ${this.capacity} (prompt + ` +
          `max_response_length)`,
      );
    }
    if (mask) {
      if (mask.length !== this.rows * T)
        throw new Error(`KvCache.reserve: mask has ${mask.length} entries, expected rows·T = ${this.rows}·${T}`);
      for (let b = 0; b < this.rows; b++) {
        for (let t = 0; t < T; t++) this.hostMask[b * this.capacity + start + t] = mask[b * T + t] ? 1 : 0;
      }
      this.uploadMask();
    }
    this.length = start + T;
    return start;
  }

  /**
   * Takes slots [from, to) of each listed row out of attention: tokens a row was fed after its turn had
   * ended (a multi-turn rollout decodes every row until the last one ends its turn).
   */
  maskSlots(ranges: readonly { row: number; from: number; to: number }[]): void {
    for (const { row, from, to } of ranges) {
      if (!(row >= 0 && row < this.rows && from >= 0 && from <= to && to <= this.length)) {
        throw new Error(
          `KvCache.maskSlots: row ${row}, slots [${from}, ${to}) outside ${this.rows} rows × ${this.length} filled ` +
            `slots`,
        );
      }
      this.hostMask.fill(0, row * this.capacity + from, row * this.capacity + to);
    }
    if (ranges.length > 0) this.uploadMask();
  }

  /**
   * Records the write of layer `layer`'s new k, v into slots [slotStart, slotStart + T) of the first `rows` rows
   * of `group`: qkv (rows·T, W) after RoPE, the group's rows only.
   */
  write(group: CacheGroup, layer: number, qkv: Tensor, rows: number, slotStart: number, T: number): void {
    const c = this.config;
    kvCacheWrite(this.engine, {
      qkv,
      kCache: group.k[layer],
      vCache: group.v[layer],
      B: rows,
      Tnew: T,
      capacity: this.capacity,
      slotStart,
      NH: c.numHeads,
      NKV: c.numKvHeads,
      HS: c.headDim,
      windowSlots: this.windowSlots ?? undefined,
    });
  }

  /** Keeps only the listed rows (ascending indices into the current rows), moved to the front in that order. */
  keepRows(keep: readonly number[]): void {
    checkKeep(keep, this.rows);
    const rowElements = this.capacity * this.kvWidth;
    const row = (t: Tensor, local: number) => t.view(`${t.name}[${local}]`, local * rowElements, [rowElements]);
    // Group by group from the first: row i takes row keep[i] ≥ i, from its own group (through the scratch, a prefix
    // of the group's new rows) or a later one (copied across), so no row is overwritten before it has moved.
    for (const group of this.groups) {
      const news = Math.min(group.maxRows, keep.length - group.first);
      if (news <= 0) break;
      const mine = keep.slice(group.first, group.first + news).filter((r) => r < group.first + group.maxRows);
      const local = mine.map((r) => r - group.first);
      for (let l = 0; l < this.config.numLayers; l++) {
        for (const [tensors, of] of [
          [group.k, (g: CacheGroup) => g.k[l]],
          [group.v, (g: CacheGroup) => g.v[l]],
        ] as const) {
          keepTensorRows(this.engine, tensors[l], rowElements, local, this.compactionScratch);
          for (let i = group.first + mine.length; i < group.first + news; i++) {
            const s = this.locate(keep[i]);
            this.engine.copy(row(of(s.group), s.local), row(tensors[l], i - group.first));
          }
        }
      }
    }
    keep.forEach((r, i) => this.hostMask.copyWithin(i * this.capacity, r * this.capacity, (r + 1) * this.capacity));
    this.hostMask.fill(1, keep.length * this.capacity);
    this.rows = keep.length;
    this.uploadMask();
  }

  destroy(): void {
    for (const g of this.groups) for (const t of [...g.k, ...g.v, g.keyMask]) this.engine.destroyTensor(t);
    this.engine.destroyTensor(this.compactionScratch);
  }
}

function checkKeep(keep: readonly number[], rows: number): void {
  keep.forEach((r, i) => {
    if (!Number.isInteger(r) || r < 0 || r >= rows || (i > 0 && r <= keep[i - 1])) {
      throw new Error(`keepRows: [${keep.join(', ')}] must be ascending row indices below ${rows}`);
    }
  });
}

/**
 * Records moving rows `keep` (ascending) of a row-major tensor to its front, through `scratch` (at least
 * keep.length·rowElements elements): WebGPU cannot copy a buffer onto itself.
 */
export function keepTensorRows(
  engine: Engine,
  tensor: Tensor,
  rowElements: number,
  keep: readonly number[],
  scratch: Tensor,
): void {
  checkKeep(keep, Math.floor(tensor.size / rowElements));
  if (scratch.size < keep.length * rowElements) {
    throw new Error(
      `keepTensorRows: scratch ${scratch.name} has ${scratch.size} elements, ${keep.length} rows of ${tensor.name} ` +
        `need ${keep.length * rowElements}`,
    );
  }
  const rows = (t: Tensor, row: number, count: number) =>
    t.view(`${t.name}[${row}:${row + count}]`, row * rowElements, [count * rowElements]);
  // Rows already in place stay: dropping the last rows copies nothing.
  const first = keep.findIndex((r, i) => r !== i);
  if (first < 0) return;
  const moved = keep.slice(first);
  moved.forEach((r, i) => engine.copy(rows(tensor, r, 1), rows(scratch, i, 1)));
  engine.copy(rows(scratch, 0, moved.length), rows(tensor, first, moved.length));
}
