import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { clearRanges, rangeTable } from '../../kernels/util/clear-ranges.ts';
import { clearRangesRef } from '../../kernels/util/clear-ranges.ref.ts';
import { randomArray } from '../support/arrays.ts';

describe('clear-ranges kernel', () => {
  // Ranges shorter and longer than a workgroup, adjacent ones, the first and last element; and more ranges than
  // one dimension of workgroups holds (folded into y).
  const cases: [string, number, [number, number][]][] = [
    [
      'mixed',
      1000,
      [
        [0, 1],
        [5, 69],
        [69, 70],
        [100, 300],
        [301, 302],
        [999, 1000],
      ],
    ],
    [
      'multiples of 4 (vec4)',
      1024,
      [
        [0, 4],
        [8, 264],
        [264, 268],
        [400, 1024],
      ],
    ],
    [
      '70,000 single elements',
      140_000,
      Array.from({ length: 70_000 }, (_, i): [number, number] => [2 * i + 1, 2 * i + 2]),
    ],
  ];
  for (const [what, n, ranges] of cases) {
    it(`matches the reference: ${what}`, async () => {
      const engine = await gpuEngine();
      const data = randomArray(n, n);
      const tensor = engine.tensorFrom('data', [n], data);
      const table = rangeTable(ranges, n, what);
      expect(table.width).toBe(what.includes('vec4') ? 4 : 1);
      clearRanges(engine, {
        data: tensor,
        ranges: engine.tensorFrom('ranges', [table.pairs.length], table.pairs, 'u32'),
        table,
      });
      expect(Array.from(await engine.read(tensor))).toEqual(Array.from(clearRangesRef({ data, ranges })));
    });
  }

  it('refuses a range outside the tensor or an empty one, naming it', () => {
    expect(() =>
      rangeTable(
        [
          [0, 4],
          [3, 11],
        ],
        10,
        'Bᵀ',
      ),
    ).toThrow('clearRanges: Bᵀ range 1 is [3, 11), expected 0 ≤ start < end ≤ 10');
    expect(() => rangeTable([[4, 4]], 10, 'Bᵀ')).toThrow(/range 0 is \[4, 4\)/);
  });
});
