import clearRangesSource from './clear-ranges.wgsl';
import { type Engine, type Tensor, type KernelSpec, expectSize, foldWorkgroups } from '../../engine/index.ts';
import { shaderSource, specsByWidth, vectorElementType, widestVector, type VectorWidth } from './rowwise.ts';

const specs = specsByWidth(
  (width): KernelSpec => ({
    name: `clear-ranges/vec${width}`,
    source: shaderSource('clear-ranges', clearRangesSource, null, width),
    bindings: [
      { name: 'data', access: 'read_write', type: vectorElementType(width) },
      { name: 'ranges', access: 'read', type: 'u32' },
    ],
    uniforms: [{ name: 'count', type: 'u32' }],
  }),
);

/** A table of ranges for clearRanges: (start, end) pairs in units of `width` elements. */
export interface RangeTable {
  pairs: Uint32Array;
  count: number;
  width: VectorWidth;
}

/** The table of (start, end) element ranges of a tensor of `size` elements, after checking each lies inside it and is
 *  not empty; in vec4 units when every end is a multiple of 4 (and so is `size`). */
export function rangeTable(ranges: readonly (readonly [number, number])[], size: number, what: string): RangeTable {
  ranges.forEach(([start, end], i) => {
    if (!(Number.isInteger(start) && Number.isInteger(end) && start >= 0 && start < end && end <= size)) {
      throw new Error(`clearRanges: ${what} range ${i} is [${start}, ${end}), expected 0 ≤ start < end ≤ ${size}`);
    }
  });
  const width: VectorWidth = size % 4 === 0 && ranges.every(([start, end]) => widestVector(start, end) === 4) ? 4 : 1;
  return { pairs: Uint32Array.from(ranges.flat(), (offset) => offset / width), count: ranges.length, width };
}

/** Zeroes data[start, end) for each range of `table` (its pairs uploaded as `ranges`), in one dispatch. */
export function clearRanges(
  engine: Engine,
  a: { data: Tensor; ranges: Tensor<'u32'>; table: Pick<RangeTable, 'count' | 'width'> },
): void {
  const { data, ranges, table } = a;
  if (data.dtype !== 'f32') throw new Error(`clearRanges: data (tensor ${data.name}) is ${data.dtype}, expected f32`);
  expectSize('clearRanges', 'ranges', ranges, 2 * table.count, `[count=${table.count}, 2]`, 'at least');
  if (data.size % table.width !== 0)
    throw new Error(`clearRanges: data (tensor ${data.name}) has ${data.size} elements, not whole vec${table.width}s`);
  if (table.count === 0) return;
  engine.dispatch(specs[table.width], {
    bindings: { data, ranges },
    uniforms: { count: table.count },
    workgroups: foldWorkgroups(table.count),
  });
}
