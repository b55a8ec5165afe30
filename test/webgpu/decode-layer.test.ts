// The fused decode layer (kernels/decode/decode-layer) against its CPU reference: a partial last group of rows; 1, 2
// and 3 query heads per kv head; Qwen3's q/k norm, Qwen2's qkv bias and an o_proj bias; head sizes 8 to 32; a cache
// with masked slots and more rows than the batch; the first slot and later ones. The kernel runs on CPU devices only
// (8-lane subgroups).
import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { decodeLayer, decodeLayerVariants, useDecodeLayer } from '../../kernels/decode/decode-layer.ts';
import { decodeLayerRef } from '../../kernels/decode/decode-layer.ref.ts';
import { transposeRef } from '../../kernels/util/transpose.ref.ts';
import { randomArray, expectClose, seededRandom } from '../support/arrays.ts';

/** (N, K) row-major -> (K, N): the transposed copies decode steps multiply by. */
function transposed(w: Float32Array, N: number, K: number): Float32Array {
  return Float32Array.from(transposeRef({ x: w, rows: N, cols: K }));
}

const cases = [
  // The bench model's layer: 8 rows in two full groups of 4.
  {
    name: 'llama GQA',
    B: 8,
    C: 128,
    NH: 4,
    NKV: 2,
    HS: 32,
    I: 384,
    capacity: 12,
    slot: 9,
    cacheRows: 8,
    qkNorm: false,
    qkvBias: false,
    oBias: false,
  },
  // The default job's Qwen3 layer shape (HS 24), a partial group of 3 rows, a cache with rows to spare.
  {
    name: 'qwen3 q/k norm',
    B: 7,
    C: 96,
    NH: 4,
    NKV: 2,
    HS: 24,
    I: 256,
    capacity: 7,
    slot: 6,
    cacheRows: 9,
    qkNorm: true,
    qkvBias: false,
    oBias: false,
  },
  // Qwen2's biases, the first slot, one row; 3 query heads per kv head (heads go through the keys in pairs).
  {
    name: 'qwen2 biases',
    B: 1,
    C: 40,
    NH: 3,
    NKV: 1,
    HS: 8,
    I: 36,
    capacity: 5,
    slot: 0,
    cacheRows: 1,
    qkNorm: false,
    qkvBias: true,
    oBias: true,
  },
  // MHA, a later slot.
  {
    name: 'MHA',
    B: 5,
    C: 32,
    NH: 2,
    NKV: 2,
    HS: 16,
    I: 20,
    capacity: 9,
    slot: 4,
    cacheRows: 5,
    qkNorm: true,
    qkvBias: true,
    oBias: false,
  },
];

describe('decode-layer kernel', () => {
  it.each(cases)('$name: B=$B C=$C NH=$NH NKV=$NKV HS=$HS I=$I slot $slot', async (c) => {
    const engine = await gpuEngine();
    if (!useDecodeLayer(engine, c)) {
      // Only a device without the fused variant (a GPU-class one, no 8-lane subgroups, fewer than 16 storage
      // buffers: WebGPU's default limits) may skip it: every case's shape fits it.
      expect(decodeLayerVariants.find((v) => v.name === 'fused')!.supported(engine.caps)).toBe(false);
      return;
    }
    const W = (c.NH + 2 * c.NKV) * c.HS;
    const kvWidth = c.NKV * c.HS;
    const random = seededRandom(5);
    const maskBatchStride = c.capacity + 1;
    // Some earlier slots are padding (mask 0); the new slot is always real.
    const keyMask = Array.from({ length: c.cacheRows * maskBatchStride }, (_, i) =>
      i % maskBatchStride === c.slot || random() > 0.3 ? 1 : 0,
    );
    const weights = {
      qkvWeight: randomArray(W * c.C, 1, 0.3),
      oWeight: randomArray(c.C * c.NH * c.HS, 2, 0.3),
      gateUpWeight: randomArray(2 * c.I * c.C, 3, 0.3),
      downWeight: randomArray(c.C * c.I, 4, 0.3),
    };
    const inputs = {
      ...weights,
      x: randomArray(c.B * c.C, 6),
      inputNorm: randomArray(c.C, 7),
      postNorm: randomArray(c.C, 8),
      qkNorm: c.qkNorm ? { q: randomArray(c.HS, 9), k: randomArray(c.HS, 10) } : undefined,
      qkvBias: c.qkvBias ? randomArray(W, 11) : undefined,
      oBias: c.oBias ? randomArray(c.C, 12) : undefined,
      positions: Array.from({ length: c.B }, (_, b) => 3 + 5 * b),
      theta: 10000,
      kCache: randomArray(c.cacheRows * c.capacity * kvWidth, 13),
      vCache: randomArray(c.cacheRows * c.capacity * kvWidth, 14),
      keyMask,
      maskBatchStride,
      eps: 1e-6,
      scale: 1 / Math.sqrt(c.HS),
    };
    const expected = decodeLayerRef({ ...c, ...inputs });
    const t = (name: string, data: Float32Array) => engine.tensorFrom(name, [data.length], data);
    const x = t('x', inputs.x);
    const kCache = t('kCache', inputs.kCache);
    const vCache = t('vCache', inputs.vCache);
    decodeLayer(engine, {
      ...c,
      x,
      kCache,
      vCache,
      qkvT: t('qkvT', transposed(weights.qkvWeight, W, c.C)),
      oT: t('oT', transposed(weights.oWeight, c.C, c.NH * c.HS)),
      gateUpT: t('gateUpT', transposed(weights.gateUpWeight, 2 * c.I, c.C)),
      downT: t('downT', transposed(weights.downWeight, c.C, c.I)),
      inputNorm: t('inputNorm', inputs.inputNorm),
      postNorm: t('postNorm', inputs.postNorm),
      qkNorm: inputs.qkNorm && { q: t('qNorm', inputs.qkNorm.q), k: t('kNorm', inputs.qkNorm.k) },
      qkvBias: inputs.qkvBias && t('qkvBias', inputs.qkvBias),
      oBias: inputs.oBias && t('oBias', inputs.oBias),
      positions: engine.tensorFrom('positions', [c.B], inputs.positions, 'i32'),
      theta: inputs.theta,
      keyMask: engine.tensorFrom('keyMask', [keyMask.length], keyMask, 'u32'),
      maskBatchStride,
      eps: inputs.eps,
      scale: inputs.scale,
    });
    expectClose(await engine.read(x), expected.x, 1e-4, 1e-4, 'x');
    expectClose(await engine.read(kCache), expected.kCache, 1e-5, 1e-5, 'kCache');
    expectClose(await engine.read(vCache), expected.vCache, 1e-5, 1e-5, 'vCache');
  });
});
