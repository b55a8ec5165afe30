// Kernel lab for decode attention: validates and times each variant on one-token decode steps against a long cache, in
// one process (each variant its own engine, rounds interleaved), against the float64 CPU reference. Every variant's
// output and cache write are checked against the reference first; the run stops on a mismatch. Times are per call (reps
// calls in one submit) and as a ratio to the first variant listed. `wg32,split` compares the GPUs' variant before
// flash-decoding (one workgroup per kv group and sequence) with the split cache; on a software device that ratio is a
// CPU's (a few cores, which B·NKV workgroups already fill), not a GPU's. Usage: node --import ./tools/node-loader.js
// tools/kernel-lab/decode-attention.ts [B,NH,NKV,HS,slot[;...]] [reps] [variants]
import { Engine, readKnobs } from '../../engine/index.ts';
import { decodeAttention } from '../../kernels/decode/decode-attention.ts';
import { decodeAttentionRef } from '../../kernels/decode/decode-attention.ref.ts';
import { randomValues } from './bench-inputs.ts';
import { median } from '../bench/harness.ts';

const shapes = (process.argv[2] ?? '1,16,8,128,4095;4,16,8,128,1023')
  .split(';')
  .map((shape) => shape.split(',').map(Number));
for (const shape of shapes) {
  if (
    shape.length !== 5 ||
    !shape.every((n) => Number.isInteger(n) && n >= 0) ||
    shape.slice(0, 4).some((n) => n === 0)
  ) {
    console.error(
      `decode-attention lab: shape "${shape.join(',')}" is not B,NH,NKV,HS,slot (positive integers, slot >= 0)`,
    );
    process.exit(1);
  }
}
const reps = Number(process.argv[3] ?? 20);
const variants = (process.argv[4] ?? 'wg32,split').split(',');
const ROUNDS = 3;
/** Largest error allowed against the float64 reference, relative to the reference's largest magnitude. */
const TOLERANCE = 1e-4;

async function runShape([B, NH, NKV, HS, slot]: number[]): Promise<void> {
  const capacity = slot + 1;
  const W = (NH + 2 * NKV) * HS;
  const cacheSize = B * capacity * NKV * HS;
  const qkvData = randomValues(B * W, 1);
  const kData = randomValues(cacheSize, 2);
  const vData = randomValues(cacheSize, 3);
  const maskData = new Uint32Array(B * capacity).fill(1);
  const scale = 1 / Math.sqrt(HS);
  const ref = decodeAttentionRef({
    qkv: qkvData,
    kCache: kData,
    vCache: vData,
    keyMask: maskData,
    B,
    NH,
    NKV,
    HS,
    capacity,
    slot,
    maskBatchStride: capacity,
    scale,
  });
  // Cache bytes a step reads: every slot's k and v of every kv head.
  const bytes = 2 * cacheSize * 4;
  console.log(`B=${B} NH=${NH} NKV=${NKV} HS=${HS} slot=${slot}`);
  const labs: { variant: string; engine: Engine; run: () => void; wall: number[] }[] = [];
  for (const variant of variants) {
    const knobs = readKnobs();
    const engine = await Engine.create({
      ...knobs,
      kernelVariants: { ...knobs.kernelVariants, 'decode-attention': variant },
    });
    const qkv = engine.tensorFrom('qkv', [B, W], qkvData);
    const kCache = engine.tensorFrom('kCache', [cacheSize], kData);
    const vCache = engine.tensorFrom('vCache', [cacheSize], vData);
    const keyMask = engine.tensorFrom('keyMask', [B * capacity], maskData, 'u32');
    const out = engine.tensor('out', [B, NH * HS]);
    const run = () =>
      decodeAttention(engine, {
        qkv,
        kCache,
        vCache,
        keyMask,
        out,
        B,
        NH,
        NKV,
        HS,
        capacity,
        slot,
        maskBatchStride: capacity,
        scale,
      });
    const before = engine.dispatchCount;
    const start = performance.now();
    run();
    await engine.sync();
    console.log(
      `${variant}: first call (compile) ${(performance.now() - start).toFixed(0)} ms, ` +
        `${engine.dispatchCount - before} dispatches`,
    );
    const errors = [
      [await engine.read(out), ref.out],
      [await engine.read(kCache), ref.kCache],
    ].map(([actual, expected]) => {
      let error = 0;
      let magnitude = 1e-30;
      for (let i = 0; i < actual.length; i++) {
        error = Math.max(error, Math.abs(actual[i] - expected[i]));
        magnitude = Math.max(magnitude, Math.abs(expected[i]));
      }
      return error / magnitude;
    });
    console.log(
      `${variant}: relative error against the reference: out ${errors[0].toExponential(1)}, kCache ` +
        `${errors[1].toExponential(1)}`,
    );
    if (errors.some((e) => !(e <= TOLERANCE))) {
      console.error(
        `decode-attention lab: variant ${variant} is off the reference by more than ${TOLERANCE} at B=${B} NH=${NH} ` +
          `NKV=${NKV} HS=${HS} slot=${slot}`,
      );
      process.exit(1);
    }
    labs.push({ variant, engine, run, wall: [] });
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const lab of labs) {
      const start = performance.now();
      for (let i = 0; i < reps; i++) lab.run();
      await lab.engine.sync();
      lab.wall.push((performance.now() - start) / reps);
    }
  }
  const baseline = median(labs[0].wall);
  for (const lab of labs) {
    const ms = median(lab.wall);
    console.log(
      `${lab.variant}: ${ms.toFixed(3)} ms/call, ${(bytes / ms / 1e6).toFixed(2)} GB/s of cache reads, ${(ms / baseline).toFixed(2)}x ${variants[0]}'s time`,
    );
    lab.engine.destroy();
  }
}

for (const shape of shapes) await runShape(shape);
