// A typed, shaped view of a GPU buffer. Tensors never own layout tricks: a view is (buffer, byte offset,
// shape); kernels index row-major. bf16 and f16 tensors (frozen models' weights) hold two elements per 4-byte
// word, element 2i in the low half; kernels that read them unpack in-kernel.
import type { HalfDType } from './half-float.ts';

export type DType = 'f32' | 'u32' | 'i32' | HalfDType;
/** Dtypes of floating-point values (parameters): a read gives float32 values. */
export type FloatDType = 'f32' | HalfDType;

/** Bytes of a float32 (and of every 32-bit dtype). */
export const BYTES_PER_ELEMENT = 4;

export function bytesPerElement(dtype: DType): number {
  return isHalf(dtype) ? 2 : 4;
}

export function isHalf(dtype: DType): dtype is HalfDType {
  return dtype === 'bf16' || dtype === 'f16';
}

export function elementCount(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** What a read returns: half tensors come back as their float32 values. */
export type TypedArrayOf<D extends DType> = D extends 'u32' ? Uint32Array : D extends 'i32' ? Int32Array : Float32Array;

export class Tensor<D extends DType = DType> {
  /** The single-buffer tensors this one is made of, in order: itself, unless it is larger than the device's
   *  largest buffer (maxBufferSize) and lives in several, cut on whole rows (Tensor.split; engine/arena.ts). A split
   *  tensor's `buffer` and `byteOffset` are its first part's; a kernel binds it in windows (engine.bindingWindows),
   *  and uploads, reads, copies and clears walk its parts. */
  readonly parts: readonly Tensor<D>[];

  constructor(
    readonly name: string,
    readonly buffer: GPUBuffer,
    readonly byteOffset: number,
    readonly shape: readonly number[],
    readonly dtype: D,
    parts?: readonly Tensor<D>[],
  ) {
    for (const d of shape) {
      if (!Number.isInteger(d) || d < 0) throw new Error(`tensor ${name}: bad shape [${shape.join(', ')}]`);
    }
    if (parts) {
      const partElements = parts.reduce((n, part) => n + part.size, 0);
      if (parts.some((part) => part.parts.length !== 1 || part.dtype !== dtype) || partElements !== this.size) {
        throw new Error(
          `tensor ${name}: parts of ${partElements} elements (${parts.map((p) => p.dtype).join(', ')}) for ` +
            `${shapeString(shape)} ${dtype}; expected single-buffer ${dtype} tensors of ${this.size} elements in all`,
        );
      }
      this.parts = parts;
      return;
    }
    if (byteOffset + this.byteLength > buffer.size) {
      throw new Error(
        `tensor ${name}: ${this.byteLength} bytes at offset ${byteOffset} overrun its buffer of ${buffer.size} bytes`,
      );
    }
    this.parts = [this];
  }

  /** One tensor of `shape` made of `parts` (single-buffer tensors of one dtype, in order). */
  static split<D extends DType>(name: string, shape: readonly number[], parts: readonly Tensor<D>[]): Tensor<D> {
    const [first] = parts;
    return new Tensor(name, first.buffer, first.byteOffset, shape, first.dtype, parts.length > 1 ? parts : undefined);
  }

  get size(): number {
    return elementCount(this.shape);
  }

  get byteLength(): number {
    return this.size * bytesPerElement(this.dtype);
  }

  /** A sub-tensor starting `elementOffset` elements in; binding it needs a device-aligned byte offset. In a split
   *  tensor it must lie within one part. */
  view(name: string, elementOffset: number, shape: readonly number[]): Tensor<D> {
    if (this.parts.length > 1) {
      const size = elementCount(shape);
      for (const { first, tensor } of partRanges(this)) {
        if (elementOffset >= first && elementOffset + size <= first + tensor.size)
          return tensor.view(name, elementOffset - first, shape);
      }
      throw new Error(
        `tensor ${this.name}: view ${name} (elements ${elementOffset} to ${elementOffset + size}) crosses the ` +
          `buffers the tensor is split across (maxBufferSize); take it part by part`,
      );
    }
    return new Tensor(
      name,
      this.buffer,
      this.byteOffset + elementOffset * bytesPerElement(this.dtype),
      shape,
      this.dtype,
    );
  }

  /** Elements [elementOffset, elementOffset + size) as a tensor of `shape`: a view, or where they cross the buffers a
   *  split tensor lies in, a split tensor of the pieces (bound window by window, engine.bindingWindows). */
  slice(name: string, elementOffset: number, size: number, shape: readonly number[] = [size]): Tensor<D> {
    if (elementCount(shape) !== size)
      throw new Error(`tensor ${this.name}: slice ${name} of ${size} elements cannot take shape ${shapeString(shape)}`);
    const end = elementOffset + size;
    const pieces = partRanges(this).flatMap(({ first, tensor }) => {
      const from = Math.max(first, elementOffset);
      const to = Math.min(first + tensor.size, end);
      return to > from ? [tensor.view(`${name}#${first}`, from - first, [to - from])] : [];
    });
    if (pieces.length === 1) return this.view(name, elementOffset, shape);
    return Tensor.split(name, shape, pieces);
  }

  /** The same memory with another shape of the same element count. */
  reshape(shape: readonly number[]): Tensor<D> {
    if (elementCount(shape) !== this.size) {
      throw new Error(`tensor ${this.name}: cannot reshape [${this.shape.join(', ')}] to [${shape.join(', ')}]`);
    }
    const parts = this.parts.length > 1 ? this.parts : undefined;
    return new Tensor(this.name, this.buffer, this.byteOffset, shape, this.dtype, parts);
  }
}

/** Each part of `tensor` with the index of its first element in the whole. */
export function partRanges<D extends DType>(tensor: Tensor<D>): { first: number; tensor: Tensor<D> }[] {
  let first = 0;
  return tensor.parts.map((part) => {
    const range = { first, tensor: part };
    first += part.size;
    return range;
  });
}

/** `a` and `b` (the same element count) as pairs of single-buffer views over the same elements, cut wherever
 *  either tensor passes from one part to the next. */
export function matchingPieces<A extends DType, B extends DType>(a: Tensor<A>, b: Tensor<B>): [Tensor<A>, Tensor<B>][] {
  if (a.parts.length === 1 && b.parts.length === 1) return [[a, b]];
  const cuts = [...new Set([...partRanges(a), ...partRanges(b)].map((r) => r.first)), a.size].sort((x, y) => x - y);
  const pieces: [Tensor<A>, Tensor<B>][] = [];
  for (let i = 0; i + 1 < cuts.length; i++) {
    const [first, end] = [cuts[i], cuts[i + 1]];
    pieces.push([
      a.view(`${a.name}[${first}:${end}]`, first, [end - first]),
      b.view(`${b.name}[${first}:${end}]`, first, [end - first]),
    ]);
  }
  return pieces;
}

export function shapeString(shape: readonly number[]): string {
  return `[${shape.join(', ')}]`;
}

/** A run of whole rows of a larger tensor, small enough to bind. */
export interface RowWindow<D extends DType = DType> {
  firstRow: number;
  rows: number;
  tensor: Tensor<D>;
}

function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}

/** Least common multiple of two positive integers. */
export function lcm(a: number, b: number): number {
  return (a * b) / gcd(a, b);
}

/** The fewest rows of `rowSize` (bytes, or any unit) whose total is a multiple of `align` (same unit): windows
 *  whose first rows are multiples of it start aligned when row 0 does. */
export function alignedRows(rowSize: number, align: number): number {
  return align / gcd(align, rowSize);
}

/** Most rows of `rowElements` elements (of `elementBytes` each) one window may hold: at most `maxBytes`, and a
 *  multiple of the rows that keep every window's start `alignBytes`-aligned (given an aligned first row). */
export function rowsPerWindow(
  rowElements: number,
  maxBytes: number,
  alignBytes: number,
  elementBytes = BYTES_PER_ELEMENT,
): number {
  const rowBytes = rowElements * elementBytes;
  const alignRows = alignedRows(rowBytes, alignBytes);
  const rows = Math.floor(maxBytes / rowBytes / alignRows) * alignRows;
  if (rows < 1) {
    throw new Error(
      `rows of ${rowBytes} bytes cannot be bound in windows of at most ${maxBytes} bytes starting ${alignBytes}-byte ` +
        `aligned`,
    );
  }
  return rows;
}

/** `tensor` (rows of `rowElements`) cut into consecutive windows of whole rows, each bindable and within one of
 *  its parts. One window (the tensor itself) when it fits. */
export function rowWindows<D extends DType>(
  tensor: Tensor<D>,
  rowElements: number,
  maxBytes: number,
  alignBytes: number,
): RowWindow<D>[] {
  const totalRows = tensor.size / rowElements;
  if (!Number.isInteger(totalRows))
    throw new Error(`tensor ${tensor.name} ${shapeString(tensor.shape)}: not whole rows of ${rowElements} elements`);
  if (tensor.parts.length === 1 && tensor.byteLength <= maxBytes) return [{ firstRow: 0, rows: totalRows, tensor }];
  // A part within one binding is one window, bound from its buffer's start: it needs no aligned row count.
  const step = (partRows: number) =>
    partRows * rowElements * bytesPerElement(tensor.dtype) <= maxBytes
      ? partRows
      : rowsPerWindow(rowElements, maxBytes, alignBytes, bytesPerElement(tensor.dtype));
  const windows: RowWindow<D>[] = [];
  for (const part of partRanges(tensor)) {
    if (part.first % rowElements !== 0)
      throw new Error(
        `tensor ${tensor.name} ${shapeString(tensor.shape)}: a part starts at element ${part.first}, inside a row ` +
          `of ${rowElements}`,
      );
    const partRows = part.tensor.size / rowElements;
    const rowsPer = step(partRows);
    for (let row = 0; row < partRows; row += rowsPer) {
      const firstRow = part.first / rowElements + row;
      const rows = Math.min(rowsPer, partRows - row);
      windows.push({
        firstRow,
        rows,
        tensor: part.tensor.view(`${tensor.name}[${firstRow}:${firstRow + rows}]`, row * rowElements, [
          rows,
          rowElements,
        ]),
      });
    }
  }
  return windows;
}
