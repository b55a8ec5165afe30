import { describe, it, expect } from 'vitest';
import { gpuEngine } from './gpu.ts';
import { add } from '../../kernels/add.ts';
import { randomArray, expectClose } from '../helpers.ts';

describe('add kernel', () => {
  it('computes alpha·a + beta·b on a size that is no multiple of the workgroup', async () => {
    const engine = await gpuEngine();
    const n = 1000;
    const a = randomArray(n, 1);
    const b = randomArray(n, 2);
    const out = engine.tensor('out', [n]);
    add(engine, engine.tensorFrom('a', [n], a), engine.tensorFrom('b', [n], b), out, 0.5, -2);
    const got = await engine.read(out);
    expectClose(got, a.map((x, i) => 0.5 * x - 2 * b[i]), 1e-6, 1e-6);
    expect(engine.dispatchCount).toBeGreaterThan(0);
  });
});
