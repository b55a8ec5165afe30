// Kernel lab for the fused LM head: `node --import ./tools/node-loader.js tools/kernel-lab/lm-head.ts [N C V]`.
// Times lmHeadForward / lmHeadBackward against the naive route this op replaces: full (N, V) logits, then a
// log-softmax that writes all N·V log-probabilities (one lane per row: max, sum, write passes) and gathers
// the target's log-probability and the entropy from them. Validates first, at the timed shape: the fused forward's
// log-probs, entropies and log-sum-exps and the backward's dHidden on up to 16 rows against lm-head.ref.ts (the rows
// are independent; a subset keeps the float64 reference to seconds at a 151,936-word vocabulary).
import { Engine, type KernelSpec, foldWorkgroups } from '../../engine/index.ts';
import { lmHeadForward, lmHeadBackward, lmHeadLogits, lmHeadStatsVariants } from '../../kernels/layers/lm-head.ts';
import { lmHeadBackwardRef, lmHeadForwardRef } from '../../kernels/layers/lm-head.ref.ts';
import { timeKernel } from '../bench/harness.ts';
import { maxViolation } from './compare.ts';

const naiveLogSoftmaxSpec: KernelSpec = {
  name: 'lab/naive-log-softmax',
  source: /* wgsl */ `
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let row = gid.x;
  if (row >= params.rows) { return; }
  let base = row * params.V;
  var m = -3.0e38;
  for (var v = 0u; v < params.V; v++) { m = max(m, logits[base + v] * params.invTemperature); }
  var s = 0.0;
  for (var v = 0u; v < params.V; v++) { s += exp(logits[base + v] * params.invTemperature - m); }
  let lse = m + log(s);
  var h = 0.0;
  for (var v = 0u; v < params.V; v++) {
    let lp = logits[base + v] * params.invTemperature - lse;
    logSoftmax[base + v] = lp;
    h -= exp(lp) * lp;
  }
  logprobs[row] = logSoftmax[base + targets[row]];
  entropy[row] = h;
}`,
  bindings: [
    { name: 'logits', access: 'read' },
    { name: 'targets', access: 'read', type: 'u32' },
    { name: 'logSoftmax', access: 'read_write' },
    { name: 'logprobs', access: 'read_write' },
    { name: 'entropy', access: 'read_write' },
  ],
  uniforms: [
    { name: 'rows', type: 'u32' },
    { name: 'V', type: 'u32' },
    { name: 'invTemperature', type: 'f32' },
  ],
};

const [N, C, V] = process.argv
  .slice(2)
  .map(Number)
  .concat([1024, 128, 512].slice(process.argv.length - 2));
const engine = await Engine.create();
const shape = `N=${N} C=${C} V=${V}`;
const random = (n: number, scale: number) => Float32Array.from({ length: n }, () => (Math.random() * 2 - 1) * scale);
const hiddenValues = random(N * C, 1);
const weightValues = random(V * C, 0.2);
const targetValues = Array.from({ length: N }, () => Math.floor(Math.random() * V));
const hidden = engine.tensorFrom('hidden', [N, C], hiddenValues);
const weight = engine.tensorFrom('weight', [V, C], weightValues);
const targets = engine.tensorFrom('targets', [N], targetValues, 'u32');
const [logprobs, entropy, lse, sumPiSquared] = [
  engine.tensor('logprobs', [N]),
  engine.tensor('entropy', [N]),
  engine.tensor('lse', [N]),
  engine.tensor('sumPiSquared', [N]),
];
const [dHidden, dWeight] = [engine.tensor('dHidden', [N, C]), engine.tensor('dWeight', [V, C])];
const dLogprobValues = random(N, 1);
const dLogprobs = engine.tensorFrom('dLogprobs', [N], dLogprobValues);
const logits = engine.tensor('logits', [N, V]);
const logSoftmax = engine.tensor('logSoftmax', [N, V]);
const common = { hidden, weight, targets, N, C, V, temperature: 0.7 };

const naiveLogSoftmax = () =>
  engine.dispatch(naiveLogSoftmaxSpec, {
    bindings: { logits, targets, logSoftmax, logprobs, entropy },
    uniforms: { rows: N, V, invTemperature: 1 / 0.7 },
    workgroups: [Math.ceil(N / 64)],
  });
// The fused forward's own kernel on the same (N, V) logits, as one chunk (width V, vec4 when V % 4 == 0).
{
  lmHeadForward(engine, { ...common, logprobs, entropy, lse });
  lmHeadBackward(engine, { ...common, lse, dLogprobs, dEntropy: null, dHidden, dWeight });
  const checked = Math.min(N, 16);
  const subset = {
    hidden: hiddenValues.subarray(0, checked * C),
    weight: weightValues,
    targets: targetValues.slice(0, checked),
    N: checked,
    C,
    V,
    temperature: 0.7,
  };
  const forward = lmHeadForwardRef(subset);
  const backward = lmHeadBackwardRef({ ...subset, dLogprobs: dLogprobValues.subarray(0, checked), dEntropy: null });
  const outputs: [string, Float32Array, ArrayLike<number>][] = [
    ['logprobs', await engine.read(logprobs), forward.logprobs],
    ['entropy', await engine.read(entropy), forward.entropy],
    ['lse', await engine.read(lse), forward.lse],
    ['dHidden', await engine.read(dHidden), backward.dHidden],
  ];
  for (const [name, got, expected] of outputs) {
    const violation = maxViolation(got.subarray(0, expected.length), expected, 1e-4, 1e-3);
    if (!(violation <= 1)) {
      console.error(`lm-head ${shape}: ${name} off its reference (${violation.toPrecision(3)}× atol 1e-4, rtol 1e-3)`);
      process.exit(1);
    }
  }
  console.log(`All results match (${checked} rows). Starting benchmarks.`);
}

const rowStats = engine.tensor('rowStats', [N * 4]);
const statsRows = [];
for (const variant of lmHeadStatsVariants) {
  statsRows.push(
    await timeKernel(
      engine,
      `stats kernel alone (${variant.name})`,
      shape,
      () =>
        engine.dispatch(variant.value.specs[V % 4 === 0 ? 4 : 1], {
          bindings: { logits, targets, rowStats, logprobs, entropy, lse },
          uniforms: { rows: N, width: V, v0: 0, invTemperature: 1 / 0.7, first: 1, last: 1 },
          workgroups: foldWorkgroups(Math.ceil(N / variant.value.rowsPerWorkgroup)),
        }),
      { bytes: 4 * N * V },
    ),
  );
}

const rows = [
  await timeKernel(
    engine,
    'lm-head forward (fused)',
    shape,
    () => lmHeadForward(engine, { ...common, logprobs, entropy, lse }),
    { flops: 2 * N * C * V },
  ),
  // verl's calculate_sum_pi_squared: one more stats pass per chunk and one small dispatch.
  await timeKernel(
    engine,
    'lm-head forward (fused) with Σπ²',
    shape,
    () => lmHeadForward(engine, { ...common, logprobs, entropy, lse, sumPiSquared }),
    { flops: 2 * N * C * V },
  ),
  await timeKernel(
    engine,
    'naive: logits + log-softmax',
    shape,
    () => {
      lmHeadLogits(engine, { hidden, weight, out: logits, N, C, V });
      naiveLogSoftmax();
    },
    { flops: 2 * N * C * V },
  ),
  await timeKernel(
    engine,
    'logits matmul alone',
    shape,
    () => lmHeadLogits(engine, { hidden, weight, out: logits, N, C, V }),
    { flops: 2 * N * C * V },
  ),
  ...statsRows,
  await timeKernel(engine, 'naive log-softmax kernel alone', shape, naiveLogSoftmax, { bytes: 4 * N * V }),
  await timeKernel(
    engine,
    'lm-head backward (fused)',
    shape,
    () => lmHeadBackward(engine, { ...common, lse, dLogprobs, dEntropy: null, dHidden, dWeight }),
    { flops: 6 * N * C * V },
  ),
  await timeKernel(
    engine,
    'lm-head backward, entropy term',
    shape,
    () => lmHeadBackward(engine, { ...common, lse, entropy, dLogprobs, dEntropy: dLogprobs, dHidden, dWeight }),
    { flops: 6 * N * C * V },
  ),
];
console.table(
  rows.map((r) => ({
    kernel: r.kernel,
    shape: r.shape,
    ms: r.ms.toFixed(3),
    gflops: r.gflops?.toFixed(2),
    gbps: r.gbps?.toFixed(2),
  })),
);
engine.destroy();
