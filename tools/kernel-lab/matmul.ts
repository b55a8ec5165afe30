// Matmul lab: `node --import ./tools/node-loader.js tools/kernel-lab/matmul.ts [variant] [--quick]` checks the variant
// (default: the one this device picks; `gpu`, `gpu-wide` or `gpu-narrow` for the GPU kernel on any device) against
// kernels/matmul/matmul.ref.ts on odd shapes in every layout, then sweeps cubes and the model's rectangular shapes
// (--quick: those of at most 256³ multiply-adds) and prints ms and GFLOP/s next to two baselines in the same run: the
// naive kernel, and a hand-written register-tiled kernel for CPU devices (HAND_WRITTEN_NT below: nt only, no epilogue,
// whole tiles only), the bar kernels/matmul/matmul must clear on lavapipe. On a software device it also prints GFLOP/s
// from the process's CPU time spread over the cores ("if idle"), which holds steady when other processes share the
// machine. A GPU variant's ratio to naive on lavapipe says little about a GPU: there workgroup memory is ordinary
// memory and 256 invocations run as a loop, so only a GPU's timing counts.
import { availableParallelism } from 'node:os';
import { Engine, describeDevice, chooseVariant, type KernelSpec, type Tensor } from '../../engine/index.ts';
import { matmul, matmulVariants, type MatmulLayout } from '../../kernels/matmul/matmul.ts';
import { matmulForwardRef } from '../../kernels/matmul/matmul.ref.ts';
import { timeKernel, withVariant } from '../bench/harness.ts';
import { randomValues } from './bench-inputs.ts';
import { maxViolation } from './compare.ts';

const LAYOUTS: MatmulLayout[] = ['nt', 'nn', 'tn'];
const CHECK_SHAPES: [number, number, number][] = [
  [1, 1, 1],
  [7, 13, 5],
  [33, 65, 17],
  [130, 3, 257],
  [96, 200, 72],
];
const SWEEP: [number, number, number][] = [
  [128, 128, 128],
  [256, 256, 256],
  [512, 512, 512],
  [1024, 1024, 1024],
  // The tiny bench model's training shapes (B·T = 1024 rows, hidden 128, SwiGLU 384, vocab 512), a decode
  // step's 8 rows, and the LM head at Qwen's vocabulary.
  [1024, 384, 128],
  [1024, 128, 384],
  [128, 384, 1024],
  [1024, 512, 128],
  [8, 384, 128],
  [64, 151936, 128],
];

// The issue's hand-written lavapipe kernel: 8 lanes (one 256-bit vector) own an 8x64 tile; both operands are
// read as vec4s along k, so each step loads 8 A vec4s (the same for every lane) and 8 B vec4s per lane for 64
// dot products of 4. Needs M % 8 == 0, N % 64 == 0, K % 4 == 0.
const HAND_WRITTEN_NT: KernelSpec = {
  name: 'lab/matmul-hand-written-nt',
  bindings: [
    { name: 'a', access: 'read', type: 'vec4<f32>' },
    { name: 'b', access: 'read', type: 'vec4<f32>' },
    { name: 'out', access: 'read_write' },
  ],
  uniforms: [
    { name: 'N', type: 'u32' },
    { name: 'K', type: 'u32' },
  ],
  source: `
@compute @workgroup_size(8)
fn main(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  let K4 = params.K / 4u;
  let m0 = wid.y * 8u;
  let n0 = wid.x * 64u + lane * 8u;
  var acc: array<array<f32, 8>, 8>;
  for (var k = 0u; k < K4; k++) {
    var bv: array<vec4<f32>, 8>;
    for (var j = 0u; j < 8u; j++) { bv[j] = b[(n0 + j) * K4 + k]; }
    for (var i = 0u; i < 8u; i++) {
      let av = a[(m0 + i) * K4 + k];
      for (var j = 0u; j < 8u; j++) { acc[i][j] += dot(av, bv[j]); }
    }
  }
  for (var i = 0u; i < 8u; i++) {
    for (var j = 0u; j < 8u; j++) { out[(m0 + i) * params.N + n0 + j] = acc[i][j]; }
  }
}`,
};

function handWrittenNt(engine: Engine, a: Tensor, b: Tensor, out: Tensor, M: number, N: number, K: number): void {
  engine.dispatch(HAND_WRITTEN_NT, { bindings: { a, b, out }, uniforms: { N, K }, workgroups: [N / 64, M / 8] });
}

async function validateHandWritten(engine: Engine): Promise<boolean> {
  const [M, N, K] = [16, 128, 36];
  const aData = randomValues(M * K, 1);
  const bData = randomValues(K * N, 2);
  const out = engine.tensor('out', [M * N]);
  handWrittenNt(engine, engine.tensorFrom('a', [M * K], aData), engine.tensorFrom('b', [K * N], bData), out, M, N, K);
  const violation = maxViolation(
    await engine.read(out),
    matmulForwardRef({ a: aData, b: bData, M, N, K, layout: 'nt' }),
    1e-5,
    1e-5,
  );
  if (violation > 1) console.log(`FAIL hand-written nt ${M}x${N}x${K}: ${violation.toFixed(1)}x over tolerance`);
  return violation <= 1;
}

async function validate(engine: Engine, variant: string): Promise<boolean> {
  let ok = true;
  for (const layout of LAYOUTS) {
    for (const [M, N, K] of CHECK_SHAPES) {
      const aData = randomValues(M * K, 1);
      const bData = randomValues(K * N, 2);
      const biasData = randomValues(N, 3);
      const outData = randomValues(M * N, 4);
      const out = engine.tensorFrom('out', [M * N], outData);
      matmul(engine, {
        a: engine.tensorFrom('a', [M * K], aData),
        b: engine.tensorFrom('b', [K * N], bData),
        out,
        M,
        N,
        K,
        layout,
        bias: engine.tensorFrom('bias', [N], biasData),
        accumulate: true,
        alpha: 0.5,
      });
      const expected = matmulForwardRef({
        a: aData,
        b: bData,
        M,
        N,
        K,
        layout,
        bias: biasData,
        out: outData,
        accumulate: true,
        alpha: 0.5,
      });
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
  const idleGflops = (flops: number, cpuMs?: number) =>
    cpuMs === undefined ? '-' : (flops / (cpuMs / cores) / 1e6).toFixed(2);
  console.log(
    `${'layout'.padEnd(7)}${'M x N x K'.padEnd(17)}${'ms'.padStart(9)}${'GFLOP/s'.padStart(9)}${'if idle'.padStart(9)}` +
      `${'hand GF/s'.padStart(10)}${'vs hand'.padStart(9)}${'naive GF/s'.padStart(11)}${'vs naive'.padStart(9)}`,
  );
  for (const layout of LAYOUTS) {
    for (const [M, N, K] of SWEEP.filter(([M, N, K]) => !quick || M * N * K <= 256 ** 3)) {
      const a = engine.tensor('a', [M * K]);
      const b = engine.tensor('b', [K * N]);
      const out = engine.tensor('out', [M * N]);
      const shape = `${M}x${N}x${K}`;
      const options = { flops: 2 * M * N * K };
      const run = () => matmul(engine, { a, b, out, M, N, K, layout });
      const ours = await withVariant(engine, 'matmul', variant, () => timeKernel(engine, variant, shape, run, options));
      const hand =
        layout === 'nt' && M % 8 === 0 && N % 64 === 0 && K % 4 === 0
          ? await timeKernel(engine, 'hand-written', shape, () => handWrittenNt(engine, a, b, out, M, N, K), options)
          : undefined;
      // The naive kernel takes minutes at the vocabulary's width; it is the baseline of the small shapes only.
      const naive =
        N * M * K <= 1024 ** 3
          ? await withVariant(engine, 'matmul', 'naive', () =>
              timeKernel(engine, 'naive', shape, run, { ...options, samples: 3 }),
            )
          : undefined;
      console.log(
        `${layout.padEnd(7)}${shape.padEnd(17)}${ours.ms.toFixed(2).padStart(9)}${ours.gflops!.toFixed(2).padStart(9)}` +
          `${idleGflops(options.flops, ours.cpu_ms).padStart(9)}${(hand ? hand.gflops!.toFixed(2) : '-').padStart(10)}` +
          `${(hand ? `${(hand.ms / ours.ms).toFixed(2)}x` : '-').padStart(9)}${(naive ? naive.gflops!.toFixed(2) : '-').padStart(11)}` +
          `${(naive ? `${(naive.ms / ours.ms).toFixed(1)}x` : '-').padStart(9)}`,
      );
      for (const t of [a, b, out]) engine.destroyTensor(t);
    }
  }
}

const engine = await Engine.create();
const quick = process.argv.includes('--quick');
const variant =
  process.argv.slice(2).find((arg) => !arg.startsWith('--')) ??
  chooseVariant('matmul', matmulVariants, engine.caps, engine.knobs).name;
console.log(`device: ${describeDevice(engine.caps, engine.knobs)}; matmul variant ${variant}`);
const valid =
  (await withVariant(engine, 'matmul', variant, () => validate(engine, variant))) &&
  (await validateHandWritten(engine));
console.log(valid ? 'validation: ok' : 'validation: FAILED');
if (valid) await sweep(engine, variant);
engine.destroy();
process.exitCode = valid ? 0 : 1;
