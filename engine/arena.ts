// One arena for many tensors: a layout assigns each named tensor a device-aligned offset, packing them into
// as few buffers as the device's binding limit allows. A tensor larger than one binding (a 152K-row embedding)
// gets a buffer of its own, seen as several bindable segments; one larger than the device's largest buffer
// (maxBufferSize: 256 MiB by default, and Qwen3-0.6B's embedding is 622 MB) gets several, each holding a run of
// its whole rows (a part). Parameters, gradients and both AdamW moments are four instances of one layout, so a
// flat kernel (AdamW, gradient norm) walks the same segments of each.
// Offsets and sizes count 4-byte words: an entry of a half dtype (a frozen model's bf16 weights) takes half as
// many words as elements.
import type { Engine } from './engine.ts';
import {
  Tensor,
  elementCount,
  bytesPerElement,
  rowsPerWindow,
  BYTES_PER_ELEMENT,
  shapeString,
  type FloatDType,
} from './tensor.ts';

/** What an arena stores: floating-point values, or u32 words of packed codes (a frozen base's NF4 weights). */
export type ArenaDType = FloatDType | 'u32';

export interface ArenaEntry {
  name: string;
  shape: readonly number[];
  /** f32 when omitted. */
  dtype?: ArenaDType;
}

export interface ArenaSlot {
  name: string;
  shape: readonly number[];
  dtype: ArenaDType;
  /** Where the tensor lives: one part, or (above maxBufferSize) runs of whole rows in buffers of their own. */
  parts: ArenaPart[];
}

/** Rows [firstRow, firstRow + rows) of a slot (rows of its leading dimension; a 0-d tensor is one row). */
export interface ArenaPart {
  buffer: number;
  /** Word offset inside the buffer. */
  offset: number;
  firstRow: number;
  rows: number;
}

/** A bindable window of one buffer. */
export interface ArenaSegment {
  buffer: number;
  /** Word offset inside the buffer. */
  offset: number;
  size: number;
}

export interface ArenaLayout {
  slots: ArenaSlot[];
  /** Words per buffer. */
  bufferSizes: number[];
  /** Every buffer cut into windows of at most one binding, in order; flat kernels dispatch once per segment. */
  segments: ArenaSegment[];
}

export function planArena(
  entries: readonly ArenaEntry[],
  maxBindingBytes: number,
  maxBufferBytes: number,
  alignBytes: number,
): ArenaLayout {
  const alignElements = Math.max(1, alignBytes / BYTES_PER_ELEMENT);
  const alignUp = (n: number) => Math.ceil(n / alignElements) * alignElements;
  const maxBinding = Math.floor(maxBindingBytes / BYTES_PER_ELEMENT / alignElements) * alignElements;
  const slots: ArenaSlot[] = [];
  const bufferSizes: number[] = [0];
  /** The buffer small tensors are packed into (every packed buffer stays one binding). */
  let packing = 0;
  const seen = new Set<string>();
  for (const entry of entries) {
    if (seen.has(entry.name)) throw new Error(`arena: tensor ${entry.name} listed twice`);
    seen.add(entry.name);
    const dtype = entry.dtype ?? 'f32';
    const totalRows = entry.shape.length > 0 ? entry.shape[0] : 1;
    const rowElements = totalRows > 0 ? elementCount(entry.shape) / totalRows : 0;
    const words = (rows: number) => Math.ceil((rows * rowElements * bytesPerElement(dtype)) / BYTES_PER_ELEMENT);
    const slot = (parts: ArenaPart[]) => slots.push({ name: entry.name, shape: entry.shape, dtype, parts });
    const size = words(totalRows);
    // A tensor and its half-precision copy (a frozen reference) split at the same rows: where the float32 form
    // must, so a copy or conversion walks matching parts.
    if (elementCount(entry.shape) * BYTES_PER_ELEMENT > maxBufferBytes) {
      const rowBytes = rowElements * BYTES_PER_ELEMENT;
      if (rowBytes > maxBufferBytes) {
        throw new Error(
          `arena: tensor ${entry.name} ${shapeString(entry.shape)} has rows of ${rowBytes} bytes (as float32), ` +
            `above the device's largest buffer of ${maxBufferBytes} bytes (maxBufferSize)`,
        );
      }
      // Whole words of halves in every part but the last (its rows × rowElements is even).
      const step = rowsPerWindow(rowElements, maxBufferBytes, 2 * BYTES_PER_ELEMENT);
      const parts: ArenaPart[] = [];
      for (let firstRow = 0; firstRow < totalRows; firstRow += step) {
        const rows = Math.min(step, totalRows - firstRow);
        parts.push({ buffer: bufferSizes.length, offset: 0, firstRow, rows });
        bufferSizes.push(words(rows));
      }
      slot(parts);
      continue;
    }
    if (size > maxBinding) {
      slot([{ buffer: bufferSizes.length, offset: 0, firstRow: 0, rows: totalRows }]);
      bufferSizes.push(size);
      continue;
    }
    let offset = alignUp(bufferSizes[packing]);
    if (offset + size > maxBinding) {
      packing = bufferSizes.length;
      bufferSizes.push(0);
      offset = 0;
    }
    slot([{ buffer: packing, offset, firstRow: 0, rows: totalRows }]);
    bufferSizes[packing] = offset + size;
  }
  const alignedSizes = bufferSizes.map(alignUp);
  const segments: ArenaSegment[] = [];
  alignedSizes.forEach((bufferSize, buffer) => {
    for (let offset = 0; offset < bufferSize; offset += maxBinding) {
      segments.push({ buffer, offset, size: Math.min(maxBinding, bufferSize - offset) });
    }
  });
  return { slots, bufferSizes: alignedSizes, segments };
}

/** One instance of a layout: real buffers and a tensor per slot. */
export class Arena {
  /** The buffers as words (f32 views; a half slot's words hold two elements each). */
  readonly buffers: Tensor<'f32'>[];
  /** Bindable windows covering every buffer (see ArenaLayout.segments). */
  readonly segments: Tensor<'f32'>[];
  private readonly byName = new Map<string, Tensor<ArenaDType>>();

  constructor(
    engine: Engine,
    readonly label: string,
    readonly layout: ArenaLayout,
  ) {
    this.buffers = layout.bufferSizes.map((size, i) => engine.tensor(`${label}#${i}`, [size]));
    this.segments = layout.segments.map((s) =>
      this.buffers[s.buffer].view(`${label}#${s.buffer}[${s.offset}:${s.offset + s.size}]`, s.offset, [s.size]),
    );
    for (const slot of layout.slots) {
      const rowShape = slot.shape.slice(1);
      const parts = slot.parts.map((part, i) => {
        const buffer = this.buffers[part.buffer];
        return new Tensor(
          slot.parts.length > 1 ? `${label}:${slot.name}#${i}` : `${label}:${slot.name}`,
          buffer.buffer,
          buffer.byteOffset + part.offset * BYTES_PER_ELEMENT,
          slot.shape.length > 0 ? [part.rows, ...rowShape] : [],
          slot.dtype,
        );
      });
      this.byName.set(slot.name, Tensor.split(`${label}:${slot.name}`, slot.shape, parts));
    }
  }

  static plan(engine: Engine, entries: readonly ArenaEntry[]): ArenaLayout {
    return planArena(
      entries,
      engine.maxBindingBytes,
      engine.caps.maxBufferSize,
      engine.caps.minStorageBufferOffsetAlignment,
    );
  }

  /** The float tensor `name` (f32, bf16 or f16). */
  get(name: string): Tensor<FloatDType> {
    const t = this.slot(name);
    if (t.dtype === 'u32')
      throw new Error(`arena ${this.label}: ${name} holds packed u32 codes (NF4), not floats: read it with words()`);
    return t as Tensor<FloatDType>;
  }

  /** The u32 tensor `name` (packed codes: a frozen base's NF4 weights). */
  words(name: string): Tensor<'u32'> {
    const t = this.slot(name);
    if (t.dtype !== 'u32') throw new Error(`arena ${this.label}: ${name} is ${t.dtype}, not u32 words`);
    return t as Tensor<'u32'>;
  }

  /** How `name` is stored. */
  dtypeOf(name: string): ArenaDType {
    return this.slot(name).dtype;
  }

  private slot(name: string): Tensor<ArenaDType> {
    const t = this.byName.get(name);
    if (!t) throw new Error(`arena ${this.label}: no tensor named ${name}`);
    return t;
  }

  has(name: string): boolean {
    return this.byName.has(name);
  }

  names(): string[] {
    return [...this.byName.keys()];
  }

  /** Words (4 bytes each) of all buffers. */
  get totalElements(): number {
    return this.layout.bufferSizes.reduce((a, b) => a + b, 0);
  }
}
