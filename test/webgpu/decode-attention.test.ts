import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { decodeAttention } from '../../kernels/decode/decode-attention.ts';
import { decodeAttentionRef } from '../../kernels/decode/decode-attention.ref.ts';
import { ropeForwardRef } from '../../kernels/layers/rope.ref.ts';
import { randomArray, expectClose, seededRandom } from '../support/arrays.ts';
import { roundToHalf, type Engine, type HalfDType } from '../../engine/index.ts';

/** Runs `body` under each variant this device can choose: on CPU devices lanes over the head dimension (dims, with
 *  subgroups of 8 or more) and over the keys (wg8), and the GPUs' split cache (split); elsewhere its own choice. */
async function forEachVariant(engine: Engine, body: (variant: string) => Promise<void>): Promise<void> {
  const variants = engine.caps.deviceClass === 'cpu' ? ['dims', 'wg8', 'split'] : [''];
  for (const variant of variants) {
    if (variant === 'dims' && !(engine.caps.subgroups && engine.caps.subgroupMinSize >= 8)) continue;
    if (variant) engine.knobs.kernelVariants['decode-attention'] = variant;
    try {
      await body(variant);
    } finally {
      delete engine.knobs.kernelVariants['decode-attention'];
    }
  }
}

interface DecodeCase {
  B: number;
  NH: number;
  NKV: number;
  HS: number;
  capacity: number;
  slot: number;
  cacheRows: number;
}

/** The kernel's out, k cache and v cache under each variant (forEachVariant), every run from the same inputs. */
async function decodeEachVariant(
  engine: Engine,
  c: DecodeCase,
  inputs: {
    qkv: Float32Array;
    kBefore: Float32Array;
    vBefore: Float32Array;
    keyMask: number[];
    maskBatchStride: number;
    rope?: { positions: number[]; theta: number };
    /** The cache's storage (the rollout's rollout.dtype); float32 when absent. */
    cacheDtype?: HalfDType;
  },
  check: (variant: string, out: Float32Array, kCache: Float32Array, vCache: Float32Array, dispatches: number) => void,
): Promise<void> {
  const { qkv, kBefore, vBefore, keyMask, maskBatchStride, rope } = inputs;
  const dtype = inputs.cacheDtype ?? 'f32';
  const kCache = engine.tensorFrom('k', [kBefore.length], kBefore, dtype);
  const vCache = engine.tensorFrom('v', [vBefore.length], vBefore, dtype);
  const out = engine.tensor('out', [c.B, c.NH * c.HS]);
  await forEachVariant(engine, async (variant) => {
    engine.upload(kCache, kBefore);
    engine.upload(vCache, vBefore);
    const before = engine.dispatchCount;
    decodeAttention(engine, {
      ...c,
      maskBatchStride,
      scale: 1 / Math.sqrt(c.HS),
      qkv: engine.tensorFrom('qkv', [c.B, qkv.length / c.B], qkv),
      kCache,
      vCache,
      out,
      keyMask: engine.tensorFrom('mask', [keyMask.length], keyMask, 'u32'),
      ...(rope
        ? { rope: { positions: engine.tensorFrom('positions', [c.B], rope.positions, 'i32'), theta: rope.theta } }
        : {}),
    });
    const dispatches = engine.dispatchCount - before;
    check(variant, await engine.read(out), await engine.read(kCache), await engine.read(vCache), dispatches);
  });
}

describe('decode-attention kernel', () => {
  // GQA and MHA, HS 8 and 12, the first slot, slots past one workgroup of lanes, padding in the mask, and a
  // cache with more rows and a wider mask than the batch uses. GQA is NH/NKV = 2, as in the model tests, whose
  // decode steps then reuse these pipelines (each (HS, NH/NKV) is one to compile on a cold cache).
  const cases = [
    { B: 3, NH: 4, NKV: 2, HS: 8, capacity: 20, slot: 17, cacheRows: 3 },
    { B: 2, NH: 3, NKV: 3, HS: 12, capacity: 6, slot: 0, cacheRows: 2 },
    { B: 2, NH: 2, NKV: 1, HS: 8, capacity: 45, slot: 44, cacheRows: 4 },
  ];
  it.each(cases)('B=$B NH=$NH NKV=$NKV HS=$HS slot $slot of $capacity', async (c) => {
    const engine = await gpuEngine();
    const W = (c.NH + 2 * c.NKV) * c.HS;
    const cacheSize = c.cacheRows * c.capacity * c.NKV * c.HS;
    const maskBatchStride = c.capacity + 3;
    const random = seededRandom(c.slot + 1);
    // left padding: the first slots of row 1 are masked; the new slot is always real
    const keyMask = Array.from({ length: c.cacheRows * maskBatchStride }, (_, i) =>
      i % maskBatchStride === c.slot || random() > 0.2 ? 1 : 0,
    );
    const qkv = randomArray(c.B * W, 1, 2);
    const kBefore = randomArray(cacheSize, 2, 2);
    const vBefore = randomArray(cacheSize, 3);
    const ref = decodeAttentionRef({
      ...c,
      maskBatchStride,
      scale: 1 / Math.sqrt(c.HS),
      qkv,
      kCache: kBefore,
      vCache: vBefore,
      keyMask,
    });
    await decodeEachVariant(
      engine,
      c,
      { qkv, kBefore, vBefore, keyMask, maskBatchStride },
      (variant, out, kCache, vCache) => {
        expectClose(out, ref.out, 1e-5, 1e-4, `${variant} out`);
        expect(kCache).toEqual(Float32Array.from(ref.kCache));
        expect(vCache).toEqual(Float32Array.from(ref.vCache));
      },
    );
  });

  // A long cache, which the GPUs' variant splits over workgroups (601 slots: splits of 256, 256 and 89) and merges in
  // a second dispatch; row 1's first 300 slots are padding, so its first split sees no key at all.
  it('a cache split over workgroups: B=2 NH=4 NKV=2 HS=8 slot 600, row 1 left-padded by 300', async () => {
    const engine = await gpuEngine();
    const c = { B: 2, NH: 4, NKV: 2, HS: 8, capacity: 640, slot: 600, cacheRows: 2 };
    const W = (c.NH + 2 * c.NKV) * c.HS;
    const cacheSize = c.cacheRows * c.capacity * c.NKV * c.HS;
    const maskBatchStride = c.capacity;
    const keyMask = Array.from({ length: c.cacheRows * maskBatchStride }, (_, i) =>
      i >= maskBatchStride && i % maskBatchStride < 300 ? 0 : 1,
    );
    const qkv = randomArray(c.B * W, 7, 2);
    const kBefore = randomArray(cacheSize, 8, 2);
    const vBefore = randomArray(cacheSize, 9);
    const ref = decodeAttentionRef({
      ...c,
      maskBatchStride,
      scale: 1 / Math.sqrt(c.HS),
      qkv,
      kCache: kBefore,
      vCache: vBefore,
      keyMask,
    });
    await decodeEachVariant(
      engine,
      c,
      { qkv, kBefore, vBefore, keyMask, maskBatchStride },
      (variant, out, kCache, vCache, dispatches) => {
        expectClose(out, ref.out, 1e-5, 1e-4, `${variant} out`);
        expect(kCache).toEqual(Float32Array.from(ref.kCache));
        expect(vCache).toEqual(Float32Array.from(ref.vCache));
        // The split variant: the splits, then the combine pass; the others attend in one dispatch.
        const split = variant === 'split' || (variant === '' && engine.caps.deviceClass === 'gpu');
        expect(dispatches, variant).toBe(split ? 2 : 1);
      },
    );
  });

  // RoPE fused (HS a multiple of 8): the same as the rope reference followed by the attention reference, at
  // positions past where unreduced angles lose accuracy.
  it.each(cases.filter((c) => c.HS % 8 === 0))('with RoPE: B=$B NH=$NH NKV=$NKV HS=$HS slot $slot', async (c) => {
    const engine = await gpuEngine();
    const W = (c.NH + 2 * c.NKV) * c.HS;
    const cacheSize = c.cacheRows * c.capacity * c.NKV * c.HS;
    const maskBatchStride = c.capacity + 1;
    const keyMask = Array.from({ length: c.cacheRows * maskBatchStride }, () => 1);
    const qkv = randomArray(c.B * W, 4, 2);
    const kBefore = randomArray(cacheSize, 5, 2);
    const vBefore = randomArray(cacheSize, 6);
    const positions = Array.from({ length: c.B }, (_, b) => c.slot + 1000 * b);
    const theta = 10000;
    const rotated = ropeForwardRef({ qkv, positions, rows: c.B, NH: c.NH, NKV: c.NKV, HS: c.HS, theta });
    const ref = decodeAttentionRef({
      ...c,
      maskBatchStride,
      scale: 1 / Math.sqrt(c.HS),
      qkv: rotated,
      kCache: kBefore,
      vCache: vBefore,
      keyMask,
    });
    await decodeEachVariant(
      engine,
      c,
      { qkv, kBefore, vBefore, keyMask, maskBatchStride, rope: { positions, theta } },
      (variant, out, kCache, vCache) => {
        expectClose(out, ref.out, 1e-5, 1e-4, `${variant} out`);
        expectClose(kCache, ref.kCache, 1e-5, 1e-5, `${variant} kCache`);
        expect(vCache).toEqual(Float32Array.from(ref.vCache));
      },
    );
  });

  // The rollout's half-precision cache (actor_rollout_ref.rollout.dtype): loads unpack it, the new k, v are stored
  // rounded to nearest even and attended as stored (rounded, as a prefill attends them). Two bounds, each against
  // float64:
  // - over the half-rounded cache and new k, v the kernel's arithmetic is the float32 kernel's: 1e-5 + 1e-4·|ref|;
  // - against the unrounded float32 cache the rounding itself: every cached k, v is off by at most u·|x| (u = 2⁻⁸ for
  //   bf16's 8-bit significand, 2⁻¹¹ for f16), so each score moves by at most ε = u·scale·Σ_d |q_d||k_d| and
  //   |Δout| ≤ max_j |v_j| · (u + e^{2ε} − 1) (softmax weights move by a factor within e^{±2ε}, Σ|Δp| ≤ e^{2ε} − 1;
  //   the value rounding adds u·Σ p_j |v_j|). Computed per (row, head) from the inputs.
  for (const dtype of ['bf16', 'f16'] as HalfDType[]) {
    const u = dtype === 'bf16' ? 2 ** -8 : 2 ** -11;
    const longCase = { B: 2, NH: 4, NKV: 2, HS: 8, capacity: 640, slot: 600, cacheRows: 2 };
    it.each([...cases, longCase])(`${dtype} cache: B=$B NH=$NH NKV=$NKV HS=$HS slot $slot of $capacity`, async (c) => {
      const engine = await gpuEngine();
      const W = (c.NH + 2 * c.NKV) * c.HS;
      const kvWidth = c.NKV * c.HS;
      const cacheSize = c.cacheRows * c.capacity * kvWidth;
      const maskBatchStride = c.capacity + 2;
      const random = seededRandom(c.slot + 11);
      const keyMask = Array.from({ length: c.cacheRows * maskBatchStride }, (_, i) =>
        i % maskBatchStride === c.slot || random() > 0.2 ? 1 : 0,
      );
      const qkv = randomArray(c.B * W, 21, 2);
      const kFull = randomArray(cacheSize, 22, 2);
      const vFull = randomArray(cacheSize, 23);
      const kBefore = roundToHalf(dtype, kFull);
      const vBefore = roundToHalf(dtype, vFull);
      const scale = 1 / Math.sqrt(c.HS);
      const common = { ...c, maskBatchStride, scale, qkv, keyMask };
      // qkv with its new k and v rounded (the q heads come first, NH·HS of each row).
      const qkvStored = Float32Array.from(qkv, (x, i) => (i % W < c.NH * c.HS ? x : roundToHalf(dtype, [x])[0]));
      const rounded = decodeAttentionRef({ ...common, qkv: qkvStored, kCache: kBefore, vCache: vBefore });
      const unrounded = decodeAttentionRef({ ...common, kCache: kFull, vCache: vFull });
      // The rounding bound per (row, head): over the slots the query attends.
      const bound = new Float64Array(c.B * c.NH * c.HS);
      for (let b = 0; b < c.B; b++) {
        for (let h = 0; h < c.NH; h++) {
          const g = Math.floor(h / (c.NH / c.NKV));
          let epsilon = 0;
          let vMax = 0;
          for (let j = 0; j <= c.slot; j++) {
            if (!keyMask[b * maskBatchStride + j]) continue;
            let dot = 0;
            for (let d = 0; d < c.HS; d++) {
              // The new token's k and v come from qkv, the others from the cache.
              const at = (b * c.capacity + j) * kvWidth + g * c.HS + d;
              const k = j === c.slot ? qkv[b * W + (c.NH + g) * c.HS + d] : kFull[at];
              const v = j === c.slot ? qkv[b * W + (c.NH + c.NKV + g) * c.HS + d] : vFull[at];
              dot += Math.abs(qkv[b * W + h * c.HS + d] * k);
              vMax = Math.max(vMax, Math.abs(v));
            }
            epsilon = Math.max(epsilon, u * scale * dot);
          }
          bound.fill(vMax * (u + Math.expm1(2 * epsilon)), (b * c.NH + h) * c.HS, (b * c.NH + h + 1) * c.HS);
        }
      }
      await decodeEachVariant(
        engine,
        c,
        { qkv, kBefore, vBefore, keyMask, maskBatchStride, cacheDtype: dtype },
        (variant, out, kCache, vCache) => {
          expectClose(out, rounded.out, 1e-5, 1e-4, `${variant} out over the rounded cache`);
          let worst = 0;
          for (let i = 0; i < out.length; i++) {
            const excess = Math.abs(out[i] - unrounded.out[i]) - (bound[i] + 1e-5 + 1e-4 * Math.abs(unrounded.out[i]));
            worst = Math.max(worst, excess);
          }
          expect(worst, `${variant}: |out − float32-cache out| beyond the rounding bound`).toBe(0);
          expect(kCache).toEqual(roundToHalf(dtype, rounded.kCache));
          expect(vCache).toEqual(roundToHalf(dtype, rounded.vCache));
        },
      );
    });
  }
});
