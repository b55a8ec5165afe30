import toHalfSource from './to-half.wgsl';
import {
  type Engine,
  type Tensor,
  type KernelSpec,
  type HalfDType,
  expectSize,
  foldWorkgroups,
  isHalf,
  matchingPieces,
  rowsPerWindow,
  shapeString,
} from '../../engine/index.ts';

/** to-half.wgsl's section of `dtype`: WGSL `toHalf(x: f32) -> u32`, x rounded to nearest even in the low 16 bits
 *  (also what the rollout's half-precision KV cache stores with, kernels/util/half-weights.ts). */
export function toHalfFunctionSource(dtype: HalfDType): string {
  const [, ...sections] = toHalfSource.split(/^\/\/\/\/ +(\S+).*$/m);
  const at = sections.indexOf(dtype);
  if (at < 0 || at % 2 !== 0) throw new Error(`to-half.wgsl has no section "//// ${dtype}"`);
  return sections[at + 1];
}

/** to-half.wgsl's main after the section of `dtype`. */
function source(dtype: HalfDType): string {
  return toHalfFunctionSource(dtype) + toHalfSource.split(/^\/\/\/\/ +(\S+).*$/m)[0];
}

const specs: Record<HalfDType, KernelSpec> = {
  bf16: spec('bf16'),
  f16: spec('f16'),
};

function spec(dtype: HalfDType): KernelSpec {
  return {
    name: `to-half/${dtype}`,
    source: source(dtype),
    bindings: [
      { name: 'values', access: 'read' },
      { name: 'halves', access: 'read_write', type: 'u32' },
    ],
    uniforms: [{ name: 'n', type: 'u32' }],
  };
}

/** halves (bf16 or f16) = values (f32) rounded to nearest even, same shape. Either larger than one binding is
 *  converted in windows (one dispatch each). */
export function toHalf(engine: Engine, a: { values: Tensor; halves: Tensor }): void {
  const { values, halves } = a;
  expectHalfPair('toHalf', values, halves);
  forEachHalfWindow(engine, values, halves, (valuesWindow, halvesWindow, n) =>
    engine.dispatch(specs[halves.dtype as HalfDType], {
      bindings: { values: valuesWindow, halves: halvesWindow },
      uniforms: { n },
      workgroups: foldWorkgroups(Math.ceil(n / 2 / 256)),
    }),
  );
}

/** A float32 tensor and its half-precision counterpart of the same shape, or one line saying which is not. */
export function expectHalfPair(kernel: string, values: Tensor, halves: Tensor): void {
  if (values.dtype !== 'f32')
    throw new Error(`${kernel}: values (tensor ${values.name}) is ${values.dtype}, expected f32`);
  if (!isHalf(halves.dtype))
    throw new Error(`${kernel}: halves (tensor ${halves.name}) is ${halves.dtype}, expected bf16 or f16`);
  expectSize(
    kernel,
    'halves',
    halves,
    values.size,
    `values' shape (tensor ${values.name}, ${shapeString(values.shape)})`,
  );
}

/** Calls `body` with matching windows of a float32 tensor and its half-precision counterpart of the same shape, each
 *  within one binding (one dispatch each): what to-half and from-half convert. */
export function forEachHalfWindow(
  engine: Engine,
  values: Tensor,
  halves: Tensor,
  body: (values: Tensor, halves: Tensor, n: number) => void,
): void {
  // Windows sized by the float32 side; an aligned half window start is then an aligned float32 start too. A tensor
  // above maxBufferSize and its half copy are split at the same rows (engine/arena.ts): pieces are whole parts.
  const align = engine.caps.minStorageBufferOffsetAlignment;
  for (const [valuesPiece, halvesPiece] of matchingPieces(values, halves)) {
    const size = valuesPiece.size;
    const step =
      valuesPiece.byteLength <= engine.maxBindingBytes ? size : rowsPerWindow(1, engine.maxBindingBytes, 2 * align);
    for (let first = 0; first < size; first += step) {
      const n = Math.min(step, size - first);
      body(
        valuesPiece.view(`${valuesPiece.name}[${first}:${first + n}]`, first, [n]),
        halvesPiece.view(`${halvesPiece.name}[${first}:${first + n}]`, first, [n]),
        n,
      );
    }
  }
}
