import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { kvCacheWrite } from '../../kernels/decode/kv-cache-write.ts';
import { kvCacheWriteRef } from '../../kernels/decode/kv-cache-write.ref.ts';
import { randomArray } from '../support/arrays.ts';

describe('kv-cache-write kernel', () => {
  // vec4 (NKV·HS = 2·8), scalar (NKV·HS = 3·5, odd), a prefill block, a one-token decode step at the last slot,
  // and a cache with more sequences than are written.
  const cases = [
    { B: 3, Tnew: 5, capacity: 9, slotStart: 0, NH: 4, NKV: 2, HS: 8, cacheRows: 3 },
    { B: 2, Tnew: 1, capacity: 7, slotStart: 6, NH: 6, NKV: 3, HS: 5, cacheRows: 2 },
    { B: 2, Tnew: 3, capacity: 8, slotStart: 4, NH: 2, NKV: 1, HS: 12, cacheRows: 4 },
  ];
  it.each(cases)('B=$B Tnew=$Tnew slots from $slotStart of $capacity, NH=$NH NKV=$NKV HS=$HS', async (c) => {
    const engine = await gpuEngine();
    const W = (c.NH + 2 * c.NKV) * c.HS;
    const cacheSize = c.cacheRows * c.capacity * c.NKV * c.HS;
    const qkv = randomArray(c.B * c.Tnew * W, 1);
    const kBefore = randomArray(cacheSize, 2);
    const vBefore = randomArray(cacheSize, 3);
    const kCache = engine.tensorFrom('k', [cacheSize], kBefore);
    const vCache = engine.tensorFrom('v', [cacheSize], vBefore);
    kvCacheWrite(engine, { ...c, qkv: engine.tensorFrom('qkv', [c.B * c.Tnew, W], qkv), kCache, vCache });
    const ref = kvCacheWriteRef({ ...c, qkv, kCache: kBefore, vCache: vBefore });
    // a copy: bit-exact
    expect(await engine.read(kCache)).toEqual(Float32Array.from(ref.kCache));
    expect(await engine.read(vCache)).toEqual(Float32Array.from(ref.vCache));
  });
});
