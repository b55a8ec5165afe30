// Kernel lab for attention: times the GPU forward and backward of each variant on a fused-qkv training shape (many
// reps in one submit), in one process, against the float64 CPU reference. Each variant gets its own engine; the
// variants' rounds alternate, so a load change on a shared machine hits both. On a software device the process's
// CPU time per call is printed too (it barely moves when other processes share the cores).
// Usage: node --import ./tools/node-loader.js tools/kernel-lab/attention.ts [B,T,NH,NKV,HS] [reps] [variants]
//   variants: comma-separated attention variants (default cpu,register: the tiled passes lavapipe ran before, and
//   the register passes); the first call's compile time is shown.
import { Engine, readKnobs } from '../../engine/index.ts';
import { attentionForward, attentionBackward, type AttentionDims } from '../../kernels/attention/attention.ts';
import { attentionForwardRef, attentionBackwardRef } from '../../kernels/attention/attention.ref.ts';
import { randomValues } from './bench-inputs.ts';
import { median } from '../bench/harness.ts';

const [B, T, NH, NKV, HS] = (process.argv[2] ?? '8,128,4,2,32').split(',').map(Number);
const reps = Number(process.argv[3] ?? 20);
const variants = (process.argv[4] ?? 'cpu,register').split(',');
const ROUNDS = 3;
const W = (NH + 2 * NKV) * HS;
const dims: AttentionDims = {
  B, Tq: T, Tk: T, NH, NKV, HS,
  qRowStride: W, qColOffset: 0, kRowStride: W, kColOffset: NH * HS, vRowStride: W, vColOffset: (NH + NKV) * HS,
  kvBatchStride: T * W, queryStart: 0, scale: 1 / Math.sqrt(HS),
};
const qkvData = randomValues(B * T * W, 1);
const dOutData = randomValues(B * T * NH * HS, 2);
const maskData = new Uint32Array(B * T).fill(1);
// Causal QKᵀ and PV products; the backward counts twice the forward's (dQ, dK, dV, dP), not its recomputation.
const forwardFlops = 2 * 2 * B * NH * HS * ((T * (T + 1)) / 2);

interface Lab { variant: string; engine: Engine; forward: () => void; backward: () => void }

async function makeLab(variant: string): Promise<Lab> {
  const knobs = readKnobs();
  const engine = await Engine.create({ ...knobs, kernelVariants: { ...knobs.kernelVariants, attention: variant } });
  const qkv = engine.tensorFrom('qkv', [B * T, W], qkvData);
  const keyMask = engine.tensorFrom('keyMask', [B, T], maskData, 'u32');
  const out = engine.tensor('out', [B * T, NH * HS]);
  const lse = engine.tensor('lse', [B, NH, T]);
  const dOut = engine.tensorFrom('dOut', [B * T, NH * HS], dOutData);
  const dqkv = engine.tensor('dqkv', [B * T, W]);
  return {
    variant, engine,
    forward: () => attentionForward(engine, { ...dims, q: qkv, k: qkv, v: qkv, keyMask, out, lse }),
    backward: () => attentionBackward(engine, { ...dims, q: qkv, k: qkv, v: qkv, keyMask, out, lse, dOut, dq: dqkv, dk: dqkv, dv: dqkv }),
  };
}

/** Wall and CPU ms of one call, `reps` calls in one submit. */
async function timeCalls(engine: Engine, record: () => void, count: number): Promise<{ wall: number; cpu: number }> {
  const cpuStart = process.cpuUsage();
  const start = performance.now();
  for (let i = 0; i < count; i++) record();
  await engine.sync();
  const cpu = process.cpuUsage(cpuStart);
  return { wall: (performance.now() - start) / count, cpu: (cpu.user + cpu.system) / 1000 / count };
}

function timeCpu(run: () => void): number {
  const start = performance.now();
  run();
  return performance.now() - start;
}

const labs: Lab[] = [];
for (const variant of variants) labs.push(await makeLab(variant));
console.log(`B=${B} T=${T} NH=${NH} NKV=${NKV} HS=${HS} on ${labs[0].engine.caps.description}`);
const results = new Map<string, { wall: number[]; cpu: number[] }>();
for (const lab of labs) {
  for (const [pass, record] of [['forward', lab.forward], ['backward', lab.backward]] as const) {
    const first = await timeCalls(lab.engine, record, 1);
    console.log(`${lab.variant} ${pass}: first call (compile) ${first.wall.toFixed(0)} ms`);
    results.set(`${lab.variant} ${pass}`, { wall: [], cpu: [] });
  }
}
for (let round = 0; round < ROUNDS; round++) {
  for (const lab of labs) {
    for (const [pass, record] of [['forward', lab.forward], ['backward', lab.backward]] as const) {
      const { wall, cpu } = await timeCalls(lab.engine, record, reps);
      results.get(`${lab.variant} ${pass}`)!.wall.push(wall);
      results.get(`${lab.variant} ${pass}`)!.cpu.push(cpu);
    }
  }
}
const refArgs = { ...dims, q: qkvData, k: qkvData, v: qkvData, keyMask: maskData };
const refMs = { forward: timeCpu(() => attentionForwardRef(refArgs)), backward: timeCpu(() => attentionBackwardRef({ ...refArgs, dOut: dOutData })) };
for (const [name, { wall, cpu }] of results) {
  const pass = name.endsWith('forward') ? 'forward' : 'backward';
  const flops = pass === 'forward' ? forwardFlops : 2 * forwardFlops;
  const ms = median(wall);
  console.log(`${name}: ${ms.toFixed(2)} ms/call (cpu ${median(cpu).toFixed(2)} ms), ${(flops / ms / 1e6).toFixed(2)} GFLOP/s, ` +
    `${(refMs[pass] / ms).toFixed(1)}x the float64 CPU reference (${refMs[pass].toFixed(0)} ms)`);
}
for (const lab of labs) lab.engine.destroy();
