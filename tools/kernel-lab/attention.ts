// Kernel lab for attention: validates and times the GPU forward and backward of each variant on fused-qkv training
// shapes (many reps in one submit), in one process, against the float64 CPU reference. Each variant gets its own
// engine; the variants' rounds alternate, so a load change on a shared machine hits both. Each variant's outputs (out,
// lse, and dq + dk + dv in the fused gradient) are checked against the reference first, and the run stops with an error
// if one is off. Times are also given as a ratio to the first variant listed. On a software device the process's CPU
// time per call is printed too (it barely moves when other processes share the cores); there a GPU variant's ratio says
// what it costs on a CPU, not how it runs on a GPU. Usage: node --import ./tools/node-loader.js
// tools/kernel-lab/attention.ts [B,T,NH,NKV,HS[;B,T,NH,NKV,HS...]] [reps] [variants]
//   variants: comma-separated attention variants (default cpu,register: the tiled passes lavapipe ran before, and
//   the register passes; unrolled,split-head compares the GPUs' variants); the first call's compile time is shown.
import { Engine, readKnobs } from '../../engine/index.ts';
import { attentionForward, attentionBackward, type AttentionDims } from '../../kernels/attention/attention.ts';
import { attentionForwardRef, attentionBackwardRef } from '../../kernels/attention/attention.ref.ts';
import { randomValues } from './bench-inputs.ts';
import { median } from '../bench/harness.ts';

const shapes = (process.argv[2] ?? '8,128,4,2,32').split(';').map((shape) => shape.split(',').map(Number));
for (const shape of shapes) {
  if (shape.length !== 5 || !shape.every((n) => Number.isInteger(n) && n > 0)) {
    console.error(`attention lab: shape "${shape.join(',')}" is not B,T,NH,NKV,HS (five positive integers)`);
    process.exit(1);
  }
}
const reps = Number(process.argv[3] ?? 20);
const variants = (process.argv[4] ?? 'cpu,register').split(',');
const ROUNDS = 3;
/** Largest error allowed against the float64 reference, relative to the reference's largest magnitude. */
const TOLERANCE = 1e-4;

interface Lab {
  variant: string;
  engine: Engine;
  forward: () => void;
  backward: () => void;
  outputs: () => Promise<Float32Array[]>;
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

function timeCpu<T>(run: () => T): { ms: number; result: T } {
  const start = performance.now();
  const result = run();
  return { ms: performance.now() - start, result };
}

/** Largest |actual − expected| over the largest |expected|. */
function relativeError(actual: Float32Array, expected: ArrayLike<number>): number {
  let error = 0;
  let scale = 1e-30;
  for (let i = 0; i < actual.length; i++) {
    error = Math.max(error, Math.abs(actual[i] - expected[i]));
    scale = Math.max(scale, Math.abs(expected[i]));
  }
  return error / scale;
}

async function runShape([B, T, NH, NKV, HS]: number[]): Promise<void> {
  const W = (NH + 2 * NKV) * HS;
  const dims: AttentionDims = {
    B,
    Tq: T,
    Tk: T,
    NH,
    NKV,
    HS,
    qRowStride: W,
    qColOffset: 0,
    kRowStride: W,
    kColOffset: NH * HS,
    vRowStride: W,
    vColOffset: (NH + NKV) * HS,
    kvBatchStride: T * W,
    queryStart: 0,
    scale: 1 / Math.sqrt(HS),
  };
  const qkvData = randomValues(B * T * W, 1);
  const dOutData = randomValues(B * T * NH * HS, 2);
  const maskData = new Uint32Array(B * T).fill(1);
  // Causal QKᵀ and PV products; the backward counts twice the forward's (dQ, dK, dV, dP), not its recomputation.
  const forwardFlops = 2 * 2 * B * NH * HS * ((T * (T + 1)) / 2);

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
      variant,
      engine,
      forward: () => attentionForward(engine, { ...dims, q: qkv, k: qkv, v: qkv, keyMask, out, lse }),
      backward: () =>
        attentionBackward(engine, {
          ...dims,
          q: qkv,
          k: qkv,
          v: qkv,
          keyMask,
          out,
          lse,
          dOut,
          dq: dqkv,
          dk: dqkv,
          dv: dqkv,
        }),
      outputs: async () => [await engine.read(out), await engine.read(lse), await engine.read(dqkv)],
    };
  }

  const labs: Lab[] = [];
  for (const variant of variants) labs.push(await makeLab(variant));
  console.log(`B=${B} T=${T} NH=${NH} NKV=${NKV} HS=${HS} on ${labs[0].engine.caps.description}`);
  const refArgs = { ...dims, q: qkvData, k: qkvData, v: qkvData, keyMask: maskData };
  const refForward = timeCpu(() => attentionForwardRef(refArgs));
  const refBackward = timeCpu(() => attentionBackwardRef({ ...refArgs, dOut: dOutData }));
  const refMs = { forward: refForward.ms, backward: refBackward.ms };
  const { dq, dk, dv } = refBackward.result;
  const expected = [refForward.result.out, refForward.result.lse, dq.map((x, i) => x + dk[i] + dv[i])];
  const results = new Map<string, { wall: number[]; cpu: number[] }>();
  for (const lab of labs) {
    for (const [pass, record] of [
      ['forward', lab.forward],
      ['backward', lab.backward],
    ] as const) {
      const first = await timeCalls(lab.engine, record, 1);
      console.log(`${lab.variant} ${pass}: first call (compile) ${first.wall.toFixed(0)} ms`);
      results.set(`${lab.variant} ${pass}`, { wall: [], cpu: [] });
    }
    const errors = (await lab.outputs()).map((actual, i) => relativeError(actual, expected[i]));
    console.log(
      `${lab.variant}: relative error against the reference: out ${errors[0].toExponential(1)}, lse ` +
        `${errors[1].toExponential(1)}, dqkv ${errors[2].toExponential(1)}`,
    );
    if (errors.some((e) => !(e <= TOLERANCE))) {
      console.error(
        `attention lab: variant ${lab.variant} is off the reference by more than ${TOLERANCE} at B=${B} T=${T} ` +
          `NH=${NH} NKV=${NKV} HS=${HS}`,
      );
      process.exit(1);
    }
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const lab of labs) {
      for (const [pass, record] of [
        ['forward', lab.forward],
        ['backward', lab.backward],
      ] as const) {
        const { wall, cpu } = await timeCalls(lab.engine, record, reps);
        results.get(`${lab.variant} ${pass}`)!.wall.push(wall);
        results.get(`${lab.variant} ${pass}`)!.cpu.push(cpu);
      }
    }
  }
  for (const [name, { wall, cpu }] of results) {
    const pass = name.endsWith('forward') ? 'forward' : 'backward';
    const flops = pass === 'forward' ? forwardFlops : 2 * forwardFlops;
    const ms = median(wall);
    const baseline = median(results.get(`${variants[0]} ${pass}`)!.wall);
    console.log(
      `${name}: ${ms.toFixed(2)} ms/call (cpu ${median(cpu).toFixed(2)} ms), ${(flops / ms / 1e6).toFixed(2)} GFLOP/s, ` +
        `${(refMs[pass] / ms).toFixed(1)}x the float64 CPU reference (${refMs[pass].toFixed(0)} ms), ${(ms / baseline).toFixed(2)}x ${variants[0]}'s time`,
    );
  }
  for (const lab of labs) lab.engine.destroy();
}

for (const shape of shapes) await runShape(shape);
