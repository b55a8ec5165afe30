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
  constructor(
    readonly name: string,
    readonly buffer: GPUBuffer,
    readonly byteOffset: number,
    readonly shape: readonly number[],
    readonly dtype: D,
  ) {
    for (const d of shape) {
      if (!Number.isInteger(d) || d < 0) throw new Error(`tensor ${name}: bad shape [${shape.join(', ')}]`);
    }
    if (byteOffset + this.byteLength > buffer.size) {
      throw new Error(
        `tensor ${name}: ${this.byteLength} bytes at offset ${byteOffset} overrun its buffer of ${buffer.size} bytes`,
      );
    }
  }

  get size(): number {
    return elementCount(this.shape);
  }

  get byteLength(): number {
    return this.size * bytesPerElement(this.dtype);
  }

  /** A sub-tensor starting `elementOffset` elements in; binding it needs a device-aligned byte offset. */
  view(name: string, elementOffset: number, shape: readonly number[]): Tensor<D> {
    return new Tensor(
      name,
      this.buffer,
      this.byteOffset + elementOffset * bytesPerElement(this.dtype),
      shape,
      this.dtype,
    );
  }

  /** The same memory with another shape of the same element count. */
  reshape(shape: readonly number[]): Tensor<D> {
    if (elementCount(shape) !== this.size) {
      throw new Error(`tensor ${this.name}: cannot reshape [${this.shape.join(', ')}] to [${shape.join(', ')}]`);
    }
    return new Tensor(this.name, this.buffer, this.byteOffset, shape, this.dtype);
  }
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

/** Most rows of `rowElements` elements (of `elementBytes` each) one window may hold: at most `maxBytes`, and a
 *  multiple of the rows that keep every window's start `alignBytes`-aligned (given an aligned first row). */
export function rowsPerWindow(
  rowElements: number,
  maxBytes: number,
  alignBytes: number,
  elementBytes = BYTES_PER_ELEMENT,
): number {
  const rowBytes = rowElements * elementBytes;
  const gcd = (x: number, y: number): number => (y === 0 ? x : gcd(y, x % y));
  const alignRows = alignBytes / gcd(alignBytes, rowBytes);
  const rows = Math.floor(maxBytes / rowBytes / alignRows) * alignRows;
  if (rows < 1) {
    throw new Error(
      `rows of ${rowBytes} bytes cannot be bound in windows of at most ${maxBytes} bytes starting ${alignBytes}-byte ` +
        `aligned`,
    );
  }
  return rows;
}

/** `tensor` (rows of `rowElements`) cut into consecutive windows of whole rows, each bindable. One window (the
 *  tensor itself) when it fits. */
export function rowWindows<D extends DType>(
  tensor: Tensor<D>,
  rowElements: number,
  maxBytes: number,
  alignBytes: number,
): RowWindow<D>[] {
  const totalRows = tensor.size / rowElements;
  if (!Number.isInteger(totalRows))
    throw new Error(`tensor ${tensor.name} ${shapeString(tensor.shape)}: not whole rows of ${rowElements} elements`);
  if (tensor.byteLength <= maxBytes) return [{ firstRow: 0, rows: totalRows, tensor }];
  const step = rowsPerWindow(rowElements, maxBytes, alignBytes, bytesPerElement(tensor.dtype));
  const windows: RowWindow<D>[] = [];
  for (let firstRow = 0; firstRow < totalRows; firstRow += step) {
    const rows = Math.min(step, totalRows - firstRow);
    windows.push({
      firstRow,
      rows,
      tensor: tensor.view(`${tensor.name}[${firstRow}:${firstRow + rows}]`, firstRow * rowElements, [
        rows,
        rowElements,
      ]),
    });
  }
  return windows;
}
