// The engine's bind-group cache: a dispatch that binds the same ranges again takes the cached group; destroying a
// buffer drops exactly the groups that bind it (each other buffer's groups stay cached and are taken again).
import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { swigluForward } from '../../kernels/layers/swiglu.ts';

describe('bind-group cache', () => {
  it('destroying a buffer drops the groups that bind it, and only those', async () => {
    const engine = await gpuEngine();
    const I = 4;
    const a = engine.tensorFrom('bg.a', [2 * I], [1, 2, 3, 4, 5, 6, 7, 8]);
    const b = engine.tensorFrom('bg.b', [2 * I], [8, 7, 6, 5, 4, 3, 2, 1]);
    const out1 = engine.tensor('bg.out1', [I]);
    const out2 = engine.tensor('bg.out2', [I]);
    const run = (gateUp: typeof a, out: typeof a) => swigluForward(engine, { gateUp, out, rows: 1, I });
    const before = engine.cachedBindGroups;
    run(a, out1);
    run(a, out2);
    run(b, out2);
    expect(engine.cachedBindGroups - before).toBe(3);
    run(a, out1);
    expect(engine.cachedBindGroups - before).toBe(3);
    engine.destroyTensor(out1);
    expect(engine.cachedBindGroups - before).toBe(2);
    engine.destroyTensor(a);
    expect(engine.cachedBindGroups - before).toBe(1);
    // b with out2 is still cached: binding them again makes no group.
    run(b, out2);
    expect(engine.cachedBindGroups - before).toBe(1);
    for (const t of [b, out2]) engine.destroyTensor(t);
    expect(engine.cachedBindGroups - before).toBe(0);
  });
});
