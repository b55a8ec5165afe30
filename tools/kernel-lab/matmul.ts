// Matmul lab: `node --import ./tools/node-loader.js tools/kernel-lab/matmul.ts [variant]` checks the variant
// (default: the one this device picks) against kernels/ref/matmul.ts on odd shapes in every layout, then sweeps
// cubes and the model's rectangular shapes and prints ms and GFLOP/s next to the naive baseline. On a
// software device it also prints GFLOP/s from the process's CPU time spread over the cores ("if idle"), which
// holds steady when other processes share the machine.
import { availableParallelism } from 'node:os';
import { Engine, chooseVariant } from '../../engine/index.ts';
import { matmul, matmulVariants, type MatmulLayout } from '../../kernels/matmul.ts';
import { matmulForwardRef } from '../../kernels/ref/matmul.ts';
import { timeKernel, withVariant } from '../bench/harness.ts';
import { randomArray, maxViolation } from '../../test/helpers.ts';

const LAYOUTS: MatmulLayout[] = ['nt', 'nn', 'tn'];
const CHECK_SHAPES: [number, number, number][] = [[1, 1, 1], [7, 13, 5], [33, 65, 17], [130, 3, 257], [96, 200, 72]];
const SWEEP: [number, number, number][] = [
  [128, 128, 128], [256, 256, 256], [512, 512, 512], [1024, 1024, 1024],
  [1024, 384, 128], [1024, 128, 384], [128, 384, 1024],
];

async function validate(engine: Engine, variant: string): Promise<boolean> {
  let ok = true;
  for (const layout of LAYOUTS) {
    for (const [M, N, K] of CHECK_SHAPES) {
      const aData = randomArray(M * K, 1);
      const bData = randomArray(K * N, 2);
      const biasData = randomArray(N, 3);
      const outData = randomArray(M * N, 4);
      const out = engine.tensorFrom('out', [M * N], outData);
      matmul(engine, {
        a: engine.tensorFrom('a', [M * K], aData), b: engine.tensorFrom('b', [K * N], bData), out, M, N, K, layout,
        bias: engine.tensorFrom('bias', [N], biasData), accumulate: true, alpha: 0.5,
      });
      const expected = matmulForwardRef({ a: aData, b: bData, M, N, K, layout, bias: biasData, out: outData, accumulate: true, alpha: 0.5 });
      const violation = maxViolation(await engine.read(out), expected, 1e-5, 1e-5);
      if (violation > 1) {
        console.log(`FAIL ${variant} ${layout} ${M}x${N}x${K}: ${violation.toFixed(1)}x over tolerance`);
        ok = false;
      }
    }
  }
  return ok;
}

async function sweep(engine: Engine, variant: string): Promise<void> {
  const cores = availableParallelism();
  const idleGflops = (flops: number, cpuMs?: number) => (cpuMs === undefined ? '-' : (flops / (cpuMs / cores) / 1e6).toFixed(2));
  console.log(`${'layout'.padEnd(7)}${'M x N x K'.padEnd(17)}${'ms'.padStart(9)}${'GFLOP/s'.padStart(9)}${'if idle'.padStart(9)}` +
    `${'naive ms'.padStart(10)}${'naive GF/s'.padStart(11)}${'if idle'.padStart(9)}${'speedup'.padStart(9)}`);
  for (const layout of LAYOUTS) {
    for (const [M, N, K] of SWEEP) {
      const a = engine.tensor('a', [M * K]);
      const b = engine.tensor('b', [K * N]);
      const out = engine.tensor('out', [M * N]);
      const run = () => matmul(engine, { a, b, out, M, N, K, layout });
      const shape = `${M}x${N}x${K}`;
      const options = { flops: 2 * M * N * K };
      const ours = await withVariant(engine, 'matmul', variant, () => timeKernel(engine, variant, shape, run, options));
      const naive = await withVariant(engine, 'matmul', 'naive', () => timeKernel(engine, 'naive', shape, run, { ...options, samples: 3 }));
      console.log(`${layout.padEnd(7)}${shape.padEnd(17)}${ours.ms.toFixed(2).padStart(9)}${ours.gflops!.toFixed(2).padStart(9)}` +
        `${idleGflops(options.flops, ours.cpu_ms).padStart(9)}${naive.ms.toFixed(2).padStart(10)}${naive.gflops!.toFixed(2).padStart(11)}` +
        `${idleGflops(options.flops, naive.cpu_ms).padStart(9)}${(naive.ms / ours.ms).toFixed(1).padStart(8)}x`);
      for (const t of [a, b, out]) engine.destroyTensor(t);
    }
  }
}

const engine = await Engine.create();
const variant = process.argv[2] ?? chooseVariant('matmul', matmulVariants, engine.caps, engine.knobs).name;
console.log(`device: ${engine.caps.description}; matmul variant ${variant}`);
const valid = await withVariant(engine, 'matmul', variant, () => validate(engine, variant));
console.log(valid ? 'validation: ok' : 'validation: FAILED');
if (valid) await sweep(engine, variant);
engine.destroy();
process.exitCode = valid ? 0 : 1;
