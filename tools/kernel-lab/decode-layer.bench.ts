// Bench case of the fused decode layer for `node tools/bench.js kernels` (tools/bench/kernels.ts runs it): one
// layer of the benchmark model for a decode batch of 8 sequences at slot 70 of 128 (a rollout's middle), against
// its CPU reference. The decode step's separate kernels are timed as a whole by `node tools/bench.js rollout`
// (WEBGPU_KERNEL_VARIANTS=decode-layer:separate).
import { decodeLayer, useDecodeLayer } from '../../kernels/decode/decode-layer.ts';
import { decodeLayerRef } from '../../kernels/decode/decode-layer.ref.ts';
import { transposeRef } from '../../kernels/util/transpose.ref.ts';
import { MODEL, F32_BYTES, checkOutputs, randomValues, upload, type KernelBenchCase } from './bench-inputs.ts';

/** (N, K) row-major -> (K, N): the transposed copies decode steps multiply by. */
function transposed(w: Float32Array, N: number, K: number): Float32Array {
  return Float32Array.from(transposeRef({ x: w, rows: N, cols: K }));
}

export function decodeLayerCases(): KernelBenchCase[] {
  const { hiddenSize: C, numHeads: NH, numKvHeads: NKV, headDim: HS, intermediateSize: I } = MODEL;
  const shape = { B: 8, C, NH, NKV, HS, I, capacity: 128, slot: 70 };
  const W = (NH + 2 * NKV) * HS;
  const kvSize = shape.B * shape.capacity * NKV * HS;
  const inputs = {
    ...shape,
    x: randomValues(shape.B * C, 40),
    qkvWeight: randomValues(W * C, 41, 0.1),
    oWeight: randomValues(C * NH * HS, 42, 0.1),
    gateUpWeight: randomValues(2 * I * C, 43, 0.1),
    downWeight: randomValues(C * I, 44, 0.1),
    inputNorm: randomValues(C, 45),
    postNorm: randomValues(C, 46),
    positions: Array.from({ length: shape.B }, () => 86),
    theta: 10000,
    kCache: randomValues(kvSize, 47),
    vCache: randomValues(kvSize, 48),
    keyMask: new Array<number>(shape.B * shape.capacity).fill(1),
    maskBatchStride: shape.capacity,
    eps: 1e-6,
    scale: 1 / Math.sqrt(HS),
  };
  const weightFloats = W * C + NH * HS * C + 3 * I * C;
  const decodeLayerExpected = () => decodeLayerRef(inputs);
  return [
    {
      op: 'decode-layer',
      kernel: 'decode layer (fused)',
      shape: `B=8,C=${C},I=${I},slot=${shape.slot}`,
      flops: 2 * shape.B * weightFloats + 4 * shape.B * NH * HS * (shape.slot + 1),
      bytes: F32_BYTES * (weightFloats + 2 * shape.B * NKV * HS * (shape.slot + 1)),
      reference: decodeLayerExpected,
      runsOn: (engine) => useDecodeLayer(engine, shape),
      setup: (engine) => {
        const x = upload(engine, 'x', inputs.x);
        const args = {
          ...inputs,
          x,
          kCache: upload(engine, 'kCache', inputs.kCache),
          vCache: upload(engine, 'vCache', inputs.vCache),
          qkvT: upload(engine, 'qkvT', transposed(inputs.qkvWeight, W, C)),
          oT: upload(engine, 'oT', transposed(inputs.oWeight, C, NH * HS)),
          gateUpT: upload(engine, 'gateUpT', transposed(inputs.gateUpWeight, 2 * I, C)),
          downT: upload(engine, 'downT', transposed(inputs.downWeight, C, I)),
          inputNorm: upload(engine, 'inputNorm', inputs.inputNorm),
          postNorm: upload(engine, 'postNorm', inputs.postNorm),
          positions: engine.tensorFrom('bench-positions', [shape.B], inputs.positions, 'i32'),
          keyMask: engine.tensorFrom('bench-keyMask', [inputs.keyMask.length], inputs.keyMask, 'u32'),
        };
        // In place: the check reads the first run's hidden state and cache rows.
        return {
          run: () => decodeLayer(engine, args),
          check: () => {
            const expected = decodeLayerExpected();
            return checkOutputs(engine, [
              ['x', x, expected.x, 1e-4, 1e-4],
              ['kCache', args.kCache, expected.kCache, 1e-5, 1e-5],
              ['vCache', args.vCache, expected.vCache, 1e-5, 1e-5],
            ]);
          },
        };
      },
    },
  ];
}
