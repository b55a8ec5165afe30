import { describe, it, expect } from 'vitest';
import { embeddingForwardRef, embeddingBackwardRef } from '../../kernels/layers/embedding.ref.ts';
import { buildTokenIndex } from '../../kernels/layers/embedding.ts';
import { randomArray, expectClose } from '../support/arrays.ts';
import { numericGradient } from '../support/numeric-gradient.ts';

describe('embedding reference backward', () => {
  it('matches finite differences, with repeated and absent ids', () => {
    const [N, V, C] = [6, 5, 3];
    const ids = [3, 0, 3, 1, 3, 0];
    const table = Float64Array.from(randomArray(V * C, 61));
    const dOut = Float64Array.from(randomArray(N * C, 62));
    const loss = () => embeddingForwardRef({ ids, table, N, V, C }).reduce((s, v, k) => s + v * dOut[k], 0);
    expectClose(embeddingBackwardRef({ ids, dOut, N, V, C }), numericGradient(table, loss), 1e-8, 1e-6, 'dTable');
  });
});

describe('buildTokenIndex', () => {
  it('groups positions by id in increasing order, each entry with its id', () => {
    const { ids, positions } = buildTokenIndex([2, 0, 2, 2, 0], 4);
    expect([...positions]).toEqual([1, 4, 0, 2, 3]);
    expect([...ids]).toEqual([0, 0, 2, 2, 2]);
  });

  it('names an id outside the vocabulary', () => {
    expect(() => buildTokenIndex([1, 4], 4)).toThrow('ids[1] = 4 is outside the vocabulary [0, 4)');
  });
});
