// Half-weight matmul lab: `node --import ./tools/node-loader.js tools/kernel-lab/matmul-half.ts` checks the nt matmul
// with a bf16 and an f16 B (f16 both read natively with shader-f16 and unpacked from words) against
// kernels/matmul/matmul.ref.ts over the half-rounded weights, then times the frozen models' projections of a
// Qwen3-0.6B-shaped layer (hidden 1,024, q/k/v 4,096 wide, SwiGLU 3,072) at decode rows (M = 2, 4, 8: the register
// kernel, 4 halves per vec2<u32> load) and prefill rows (M = 256: the tiled kernel), and the LM head's 16,384-row
// vocabulary chunk, float32 and half B in the same run, and prints each half time as a ratio of the float32 one — on a
// software device from the process's CPU time per run (steady when other processes share the cores; wall time is not).
import { Engine, describeDevice, chooseVariant, roundToHalf, type FloatDType } from '../../engine/index.ts';
import { matmul, matmulVariants } from '../../kernels/matmul/matmul.ts';
import { matmulForwardRef } from '../../kernels/matmul/matmul.ref.ts';
import { timeKernel, withVariant } from '../bench/harness.ts';
import { randomValues } from './bench-inputs.ts';
import { maxViolation } from './compare.ts';

/** Columns: B's dtype, and for f16 how it is read (matmul-f16 variant: native with shader-f16, or unpacked). */
const COLUMNS: [string, FloatDType, string | null][] = [
  ['f32', 'f32', null],
  ['bf16', 'bf16', null],
  ['f16 native', 'f16', 'native'],
  ['f16 unpacked', 'f16', 'unpacked'],
];
const CHECK_SHAPES: [number, number, number][] = [
  [1, 1, 1],
  [7, 13, 5],
  [3, 70, 64],
  [40, 65, 96],
  [8, 130, 136],
];
const SWEEP: [string, number, number, number][] = [];
for (const M of [2, 4, 8, 256]) {
  SWEEP.push(
    [`qkv_proj M=${M}`, M, 4096, 1024],
    [`gate_up_proj M=${M}`, M, 6144, 1024],
    [`down_proj M=${M}`, M, 1024, 3072],
  );
}
SWEEP.push(['lm-head chunk M=8', 8, 16384, 1024], ['lm-head chunk M=256', 256, 16384, 1024]);

async function validate(engine: Engine): Promise<boolean> {
  let ok = true;
  for (const [, dtype, f16Variant] of COLUMNS.filter(
    ([, d, v]) => d !== 'f32' && (v !== 'native' || engine.caps.shaderF16),
  )) {
    for (const [M, N, K] of CHECK_SHAPES) {
      if (f16Variant) engine.knobs.kernelVariants['matmul-f16'] = f16Variant;
      const aData = randomValues(M * K, 1);
      const bData = randomValues(K * N, 2);
      const out = engine.tensor('out', [M * N]);
      matmul(engine, {
        a: engine.tensorFrom('a', [M * K], aData),
        b: engine.tensorFrom('b', [K * N], bData, dtype),
        out,
        M,
        N,
        K,
        layout: 'nt',
      });
      delete engine.knobs.kernelVariants['matmul-f16'];
      const violation = maxViolation(
        await engine.read(out),
        matmulForwardRef({ a: aData, b: roundToHalf(dtype as 'bf16' | 'f16', bData), M, N, K, layout: 'nt' }),
        1e-5,
        1e-5,
      );
      if (violation > 1) {
        console.log(`FAIL ${dtype} ${f16Variant ?? ''} nt ${M}x${N}x${K}: ${violation.toFixed(1)}x over tolerance`);
        ok = false;
      }
    }
  }
  return ok;
}

async function sweep(engine: Engine): Promise<void> {
  const unit = engine.caps.softwareAdapter ? 'cpu ms' : 'ms';
  const columns = COLUMNS.filter(([, , v]) => v !== 'native' || engine.caps.shaderF16);
  console.log(
    `${'shape'.padEnd(22)}${'M x N x K'.padEnd(18)}${columns.map(([name]) => `${name} ${unit}`.padStart(19)).join('')}` +
      `${columns
        .slice(1)
        .map(([name]) => `${name}/f32`.padStart(18))
        .join('')}`,
  );
  for (const [name, M, N, K] of SWEEP) {
    const a = engine.tensor('a', [M * K]);
    const out = engine.tensor('out', [M * N]);
    const ms: number[] = [];
    for (const [column, dtype, f16Variant] of columns) {
      const b = engine.tensor('b', [N * K], dtype);
      const time = () =>
        timeKernel(
          engine,
          `matmul nt ${column}`,
          `${M}x${N}x${K}`,
          () => matmul(engine, { a, b, out, M, N, K, layout: 'nt' }),
          { samples: 5 },
        );
      const row = await (f16Variant ? withVariant(engine, 'matmul-f16', f16Variant, time) : time());
      ms.push(row.cpu_ms ?? row.ms);
      engine.destroyTensor(b);
    }
    console.log(
      `${name.padEnd(22)}${`${M}x${N}x${K}`.padEnd(18)}${ms.map((t) => t.toFixed(2).padStart(19)).join('')}` +
        `${ms
          .slice(1)
          .map((t) => `${(t / ms[0]).toFixed(2)}x`.padStart(18))
          .join('')}`,
    );
    for (const t of [a, out]) engine.destroyTensor(t);
  }
}

const engine = await Engine.create();
console.log(
  `device: ${describeDevice(engine.caps, engine.knobs)}; matmul variant ` +
    `${chooseVariant('matmul', matmulVariants, engine.caps, engine.knobs).name}`,
);
const valid = await validate(engine);
console.log(valid ? 'validation: ok' : 'validation: FAILED');
if (valid) await sweep(engine);
engine.destroy();
process.exitCode = valid ? 0 : 1;
