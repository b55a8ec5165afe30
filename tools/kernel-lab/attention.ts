// Kernel lab for attention: times the GPU forward and backward on a fused-qkv training shape (many reps in one
// submit) against the float64 CPU reference.
// Usage: node --import ./tools/node-loader.js tools/kernel-lab/attention.ts [B,T,NH,NKV,HS] [reps]
import { Engine } from '../../engine/index.ts';
import { attentionForward, attentionBackward, type AttentionDims } from '../../kernels/attention.ts';
import { attentionForwardRef, attentionBackwardRef } from '../../kernels/ref/attention.ts';
import { randomArray } from '../../test/helpers.ts';

const [B, T, NH, NKV, HS] = (process.argv[2] ?? '8,128,4,2,32').split(',').map(Number);
const reps = Number(process.argv[3] ?? 20);
const W = (NH + 2 * NKV) * HS;
const dims: AttentionDims = {
  B, Tq: T, Tk: T, NH, NKV, HS,
  qRowStride: W, qColOffset: 0, kRowStride: W, kColOffset: NH * HS, vRowStride: W, vColOffset: (NH + NKV) * HS,
  kvBatchStride: T * W, queryStart: 0, scale: 1 / Math.sqrt(HS),
};
const qkvData = randomArray(B * T * W, 1);
const dOutData = randomArray(B * T * NH * HS, 2);
const maskData = new Uint32Array(B * T).fill(1);

const engine = await Engine.create();
const qkv = engine.tensorFrom('qkv', [B * T, W], qkvData);
const keyMask = engine.tensorFrom('keyMask', [B, T], maskData, 'u32');
const out = engine.tensor('out', [B * T, NH * HS]);
const lse = engine.tensor('lse', [B, NH, T]);
const dOut = engine.tensorFrom('dOut', [B * T, NH * HS], dOutData);
const dqkv = engine.tensor('dqkv', [B * T, W]);
const forward = () => attentionForward(engine, { ...dims, q: qkv, k: qkv, v: qkv, keyMask, out, lse });
const backward = () => attentionBackward(engine, { ...dims, q: qkv, k: qkv, v: qkv, keyMask, out, lse, dOut, dq: dqkv, dk: dqkv, dv: dqkv });

async function timeGpu(name: string, record: () => void): Promise<void> {
  let start = performance.now();
  record();
  await engine.sync();
  const first = performance.now() - start;
  start = performance.now();
  for (let i = 0; i < reps; i++) record();
  await engine.sync();
  console.log(`${name}: ${((performance.now() - start) / reps).toFixed(2)} ms/call (first call with compile ${first.toFixed(0)} ms)`);
}

function timeCpu(name: string, run: () => void): void {
  const start = performance.now();
  run();
  console.log(`${name}: ${(performance.now() - start).toFixed(0)} ms`);
}

console.log(`B=${B} T=${T} NH=${NH} NKV=${NKV} HS=${HS} on ${engine.caps.description}`);
await timeGpu('gpu forward (1 dispatch)', forward);
await timeGpu('gpu backward (3 dispatches)', backward);
const refArgs = { ...dims, q: qkvData, k: qkvData, v: qkvData, keyMask: maskData };
timeCpu('cpu reference forward (float64)', () => attentionForwardRef(refArgs));
timeCpu('cpu reference backward (float64)', () => attentionBackwardRef({ ...refArgs, dOut: dOutData }));
engine.destroy();
