import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { kvCacheWrite } from '../../kernels/decode/kv-cache-write.ts';
import { kvCacheWriteRef } from '../../kernels/decode/kv-cache-write.ref.ts';
import { kvCacheUnpack } from '../../kernels/decode/kv-cache-unpack.ts';
import { kvCacheUnpackRef } from '../../kernels/decode/kv-cache-unpack.ref.ts';
import { randomArray } from '../support/arrays.ts';
import { roundToHalf, type HalfDType } from '../../engine/index.ts';

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

  // The rollout's half-precision cache (rollout.dtype): the written slots hold the new k, v rounded to nearest even
  // (engine/half-float.ts encodes the same way on the host), the others keep their bits; unpacking slots [0, Tk)
  // gives those float32 values exactly, compacted to (B, Tk, NKV·HS).
  const halfCases = cases.filter((c) => (c.NKV * c.HS) % 4 === 0);
  for (const dtype of ['bf16', 'f16'] as HalfDType[]) {
    it.each(halfCases)(`${dtype} cache: B=$B Tnew=$Tnew slots from $slotStart, then unpacked`, async (c) => {
      const engine = await gpuEngine();
      const W = (c.NH + 2 * c.NKV) * c.HS;
      const kvWidth = c.NKV * c.HS;
      const cacheSize = c.cacheRows * c.capacity * kvWidth;
      // Values with more mantissa than a half holds, ties included (x.5 ulps round to even).
      const qkv = randomArray(c.B * c.Tnew * W, 4, 3);
      qkv[c.NH * c.HS] = 1 + 2 ** -8;
      qkv[c.NH * c.HS + 1] = 1 + 3 * 2 ** -8;
      const kBefore = roundToHalf(dtype, randomArray(cacheSize, 5));
      const vBefore = roundToHalf(dtype, randomArray(cacheSize, 6));
      const kCache = engine.tensorFrom('k', [cacheSize], kBefore, dtype);
      const vCache = engine.tensorFrom('v', [cacheSize], vBefore, dtype);
      kvCacheWrite(engine, { ...c, qkv: engine.tensorFrom('qkv', [c.B * c.Tnew, W], qkv), kCache, vCache });
      const ref = kvCacheWriteRef({ ...c, qkv, kCache: kBefore, vCache: vBefore });
      const kRef = roundToHalf(dtype, ref.kCache);
      const vRef = roundToHalf(dtype, ref.vCache);
      expect(await engine.read(kCache)).toEqual(kRef);
      expect(await engine.read(vCache)).toEqual(vRef);

      const Tk = c.slotStart + c.Tnew;
      const k = engine.tensor('unpackedK', [c.B, Tk, kvWidth]);
      const v = engine.tensor('unpackedV', [c.B, Tk, kvWidth]);
      kvCacheUnpack(engine, { kCache, vCache, k, v, B: c.B, Tk, capacity: c.capacity, kvWidth });
      const slots = (cache: Float32Array) =>
        Float32Array.from(kvCacheUnpackRef({ cache, B: c.B, Tk, capacity: c.capacity, kvWidth }));
      expect(await engine.read(k)).toEqual(slots(kRef));
      expect(await engine.read(v)).toEqual(slots(vRef));
    });
  }

  it('refuses a half cache whose rows are not whole vec4s, and caches of two dtypes', async () => {
    const engine = await gpuEngine();
    const c = { B: 1, Tnew: 1, capacity: 2, slotStart: 0, NH: 2, NKV: 1, HS: 6 };
    const qkv = engine.tensor('qkv', [1, 24]);
    const half = engine.tensor('k', [12], 'bf16');
    expect(() => kvCacheWrite(engine, { ...c, qkv, kCache: half, vCache: engine.tensor('v', [12], 'bf16') })).toThrow(
      /a bf16 cache needs NKV·HS=6 to be a multiple of 4/,
    );
    expect(() =>
      kvCacheWrite(engine, {
        ...c,
        HS: 8,
        qkv: engine.tensor('qkv8', [1, 32]),
        kCache: engine.tensor('k8', [16], 'bf16'),
        vCache: engine.tensor('v8', [16]),
      }),
    ).toThrow(/kCache is bf16 and vCache f32/);
  });
});
