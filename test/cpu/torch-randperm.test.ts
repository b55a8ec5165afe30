// tools/verl/torch-randperm.ts: torch's CPU generator (MT19937) and randperm_cpu's swap order, for the verl cases a
// random draw decides (clip_cov).
import { describe, it, expect } from 'vitest';
import { mt19937Outputs, torchRandperm } from '../../tools/verl/torch-randperm.ts';

describe("torch's CPU randperm", () => {
  it("MT19937 gives the reference outputs (seed 5489, the generator's default)", () => {
    expect(mt19937Outputs(5489, 3)).toEqual([3499211612, 581869302, 3890346734]);
  });

  it('randperm swaps r[i] with r[i + random() % (n − i)]: a permutation, reproducible per seed', () => {
    const random = mt19937Outputs(7, 9);
    const expected = Array.from({ length: 10 }, (_, i) => i);
    for (let i = 0; i < 9; i++) {
      const z = random[i] % (10 - i);
      [expected[i], expected[z + i]] = [expected[z + i], expected[i]];
    }
    expect(torchRandperm(10, 7)).toEqual(expected);
    expect([...torchRandperm(10, 7)].sort((a, b) => a - b)).toEqual(Array.from({ length: 10 }, (_, i) => i));
  });
});
