// `node tools/bench.js kernels`: per-kernel timings at the shapes the model runs (the "tiny" benchmark config:
// batch 8 x 128 tokens, hidden 128, 4 / 2 heads of 32, SwiGLU 384, vocab 512; PPO kernels at 256 sequences x 128
// response tokens). Each op family contributes a list of cases. A case with a naive GPU variant is timed twice
// and reports vs_naive; the others carry the op's CPU reference (kernels/ref) on the same inputs and report
// vs_cpu, its time over the kernel's, where one reference run takes at most a few seconds.
import { type Engine, type Tensor, seededRandom } from '../../engine/index.ts';
import { timeKernel, timeReference, withVariant, type KernelBenchRow } from './harness.ts';
import { BENCH_TINY } from '../../models/presets.ts';
import { qkvWidth } from '../../models/parameter-layout.ts';
import { matmul, type MatmulLayout } from '../../kernels/matmul.ts';
import { embeddingForward, embeddingBackward, buildTokenIndex } from '../../kernels/embedding.ts';
import { rmsnormForward, rmsnormBackward } from '../../kernels/rmsnorm.ts';
import { headRmsnormForward, headRmsnormBackward } from '../../kernels/head-rmsnorm.ts';
import { ropeForward } from '../../kernels/rope.ts';
import { attentionForward, attentionBackward, type AttentionDims } from '../../kernels/attention.ts';
import { swigluForward, swigluBackward } from '../../kernels/swiglu.ts';
import { lmHeadForward, lmHeadBackward } from '../../kernels/lm-head.ts';
import { valueHeadForward, valueHeadBackward } from '../../kernels/value-head.ts';
import { adamwStep, gradNormSquared } from '../../kernels/adamw.ts';
import { weightedSum } from '../../kernels/reduce.ts';
import { computeActorLossGpu } from '../../kernels/policy-loss.ts';
import { computeValueLossGpu } from '../../kernels/value-loss.ts';
import { computeGaeAdvantageReturnGpu } from '../../kernels/gae.ts';
import { computeOutcomeAdvantageGpu, groupLayout, groupTensors } from '../../kernels/advantage-outcome.ts';
import { applyKlPenaltyGpu } from '../../kernels/kl-penalty.ts';
import { embeddingForwardRef, embeddingBackwardRef } from '../../kernels/ref/embedding.ts';
import { rmsnormForwardRef, rmsnormBackwardRef } from '../../kernels/ref/rmsnorm.ts';
import { headRmsnormForwardRef, headRmsnormBackwardRef } from '../../kernels/ref/head-rmsnorm.ts';
import { ropeForwardRef } from '../../kernels/ref/rope.ts';
import { attentionForwardRef, attentionBackwardRef } from '../../kernels/ref/attention.ts';
import { swigluForwardRef, swigluBackwardRef } from '../../kernels/ref/swiglu.ts';
import { lmHeadForwardRef, lmHeadBackwardRef } from '../../kernels/ref/lm-head.ts';
import { valueHeadForwardRef, valueHeadBackwardRef } from '../../kernels/ref/value-head.ts';
import { adamwStepRef, gradNormSquaredRef } from '../../kernels/ref/adamw.ts';
import { weightedSumRef } from '../../kernels/ref/reduce.ts';
import { computeActorLossRef } from '../../kernels/ref/policy-loss.ts';
import type { PolicyLossConfig } from '../../kernels/ppo-vocabulary.ts';
import { computeValueLossRef } from '../../kernels/ref/value-loss.ts';
import { computeGaeAdvantageReturnRef } from '../../kernels/ref/gae.ts';
import { computeOutcomeAdvantageRef } from '../../kernels/ref/advantage-outcome.ts';
import { applyKlPenaltyRef } from '../../kernels/ref/kl-penalty.ts';
import { localAggregation } from '../../kernels/ref/agg-loss.ts';

export type { KernelBenchRow } from './harness.ts';

export interface KernelBenchCase {
  /** Op name as WEBGPU_KERNEL_VARIANTS knows it. */
  op: string;
  /** Row label (op plus what distinguishes the case, e.g. its layout). */
  kernel: string;
  shape: string;
  /** Floating-point operations of one run, for GFLOP/s (where they dominate: matmul, attention, LM head). */
  flops?: number;
  /** Bytes of one run, for GB/s: each input read and each output written once. */
  bytes?: number;
  /** Variant to time as the baseline under the same inputs, for vs_naive. */
  naiveVariant?: string;
  /** The same computation by the op's CPU reference on the inputs setup uploads, timed for vs_cpu. */
  reference?: () => unknown;
  /** Allocates the inputs once and returns the function that records one run. */
  setup: (engine: Engine) => () => void;
}

const F32_BYTES = 4;
const MODEL = BENCH_TINY;
/** Sequences and tokens per sequence of the model kernels' batch. */
const B = 8;
const T = 128;
const ROWS = B * T;
/** Sequences and response tokens of the PPO kernels. */
const PPO_B = 256;
const PPO_T = 128;

/** Seeded values uniform in [-scale, scale): the inputs a case uploads and hands its CPU reference. */
function randomValues(n: number, seed: number, scale = 1): Float32Array {
  const random = seededRandom(seed);
  return Float32Array.from({ length: n }, () => scale * (2 * random() - 1));
}

function randomIds(n: number, seed: number, V: number): Uint32Array {
  const random = seededRandom(seed);
  return Uint32Array.from({ length: n }, () => Math.floor(random() * V));
}

/** Response masks [PPO_B, PPO_T] with lengths spread over [PPO_T/4, PPO_T], as a rollout's are. */
function responseMask(seed: number): Float32Array {
  const random = seededRandom(seed);
  const mask = new Float32Array(PPO_B * PPO_T);
  for (let b = 0; b < PPO_B; b++) {
    const length = Math.ceil((0.25 + 0.75 * random()) * PPO_T);
    mask.fill(1, b * PPO_T, b * PPO_T + length);
  }
  return mask;
}

function upload(engine: Engine, name: string, data: Float32Array): Tensor {
  return engine.tensorFrom(`bench-${name}`, [data.length], data);
}

/** The model's matmul shapes as M x N x K: 1024³ for every layout, then a 1024-row batch through a
 *  384-wide layer (forward nt, input gradient nn, weight gradient tn). */
export function matmulCases(): KernelBenchCase[] {
  const shapes: [MatmulLayout, number, number, number][] = [
    ['nt', 1024, 1024, 1024], ['nn', 1024, 1024, 1024], ['tn', 1024, 1024, 1024],
    ['nt', 1024, 384, 128], ['nn', 1024, 128, 384], ['tn', 128, 384, 1024],
  ];
  return shapes.map(([layout, M, N, K]) => ({
    op: 'matmul',
    kernel: `matmul ${layout}`,
    shape: `${M}x${N}x${K}`,
    flops: 2 * M * N * K,
    naiveVariant: 'naive',
    setup: (engine) => {
      const a = engine.tensor('bench-a', [M * K]);
      const b = engine.tensor('bench-b', [K * N]);
      const out = engine.tensor('bench-out', [M * N]);
      return () => matmul(engine, { a, b, out, M, N, K, layout });
    },
  }));
}

/** Token embedding gather, and its scatter-add backward over the token index the trainer builds on the host. */
export function embeddingCases(): KernelBenchCase[] {
  const { vocabSize: V, hiddenSize: C } = MODEL;
  const N = ROWS;
  const ids = randomIds(N, 1, V);
  const table = randomValues(V * C, 2);
  const dOut = randomValues(N * C, 3);
  const shape = `N=${N},V=${V},C=${C}`;
  return [
    {
      op: 'embedding', kernel: 'embedding forward', shape, bytes: F32_BYTES * (N + V * C + N * C),
      reference: () => embeddingForwardRef({ ids, table, N, V, C }),
      setup: (engine) => {
        const idsTensor = engine.tensorFrom('bench-ids', [N], ids, 'u32');
        const tableTensor = upload(engine, 'table', table);
        const out = engine.tensor('bench-out', [N * C]);
        return () => embeddingForward(engine, { ids: idsTensor, table: tableTensor, out, N, V, C });
      },
    },
    {
      op: 'embedding', kernel: 'embedding backward', shape, bytes: F32_BYTES * (V + 1 + N + N * C + V * C),
      reference: () => embeddingBackwardRef({ ids, dOut, N, V, C }),
      setup: (engine) => {
        const index = buildTokenIndex(ids, V);
        const tokenOffsets = engine.tensorFrom('bench-token-offsets', [V + 1], index.offsets, 'u32');
        const tokenPositions = engine.tensorFrom('bench-token-positions', [N], index.positions, 'u32');
        const dOutTensor = upload(engine, 'dOut', dOut);
        const dTable = engine.tensor('bench-dTable', [V * C]);
        return () => embeddingBackward(engine, { tokenOffsets, tokenPositions, dOut: dOutTensor, dTable, N, V, C, accumulate: false });
      },
    },
  ];
}

/** The trunk's RMSNorm over hidden rows; the backward adds into dWeight as every call in the trunk does. */
export function rmsnormCases(): KernelBenchCase[] {
  const { hiddenSize: cols, rmsNormEps: eps } = MODEL;
  const rows = ROWS;
  const x = randomValues(rows * cols, 4);
  const weight = randomValues(cols, 5);
  const dOut = randomValues(rows * cols, 6);
  const { rstd } = rmsnormForwardRef({ x, weight, rows, cols, eps });
  const shape = `rows=${rows},C=${cols}`;
  return [
    {
      op: 'rmsnorm', kernel: 'rmsnorm forward', shape, bytes: F32_BYTES * (2 * rows * cols + cols + rows),
      reference: () => rmsnormForwardRef({ x, weight, rows, cols, eps }),
      setup: (engine) => {
        const t = { x: upload(engine, 'x', x), weight: upload(engine, 'weight', weight) };
        const out = engine.tensor('bench-out', [rows * cols]);
        const rstdTensor = engine.tensor('bench-rstd', [rows]);
        return () => rmsnormForward(engine, { ...t, out, rstd: rstdTensor, rows, cols, eps });
      },
    },
    {
      op: 'rmsnorm', kernel: 'rmsnorm backward', shape, bytes: F32_BYTES * (3 * rows * cols + rows + 3 * cols),
      reference: () => rmsnormBackwardRef({ x, weight, rstd, dOut, rows, cols }),
      setup: (engine) => {
        const t = {
          x: upload(engine, 'x', x), weight: upload(engine, 'weight', weight),
          rstd: upload(engine, 'rstd', Float32Array.from(rstd)), dOut: upload(engine, 'dOut', dOut),
        };
        const dx = engine.tensor('bench-dx', [rows * cols]);
        const dWeight = engine.tensor('bench-dWeight', [cols]);
        return () => rmsnormBackward(engine, { ...t, dx, dWeight, rows, cols, accumulateDx: false, accumulateDWeight: true });
      },
    },
  ];
}

/** Per-head RMSNorm of the q and k heads inside the fused qkv rows (Qwen3's q_norm / k_norm). */
export function headRmsnormCases(): KernelBenchCase[] {
  const { numHeads: NH, numKvHeads: NKV, headDim: HS, rmsNormEps: eps } = MODEL;
  const rows = ROWS;
  const W = qkvWidth(MODEL);
  const qkv = randomValues(rows * W, 7);
  const qWeight = randomValues(HS, 8);
  const kWeight = randomValues(HS, 9);
  const dOut = randomValues(rows * W, 10);
  const { rstd } = headRmsnormForwardRef({ qkv, qWeight, kWeight, rows, NH, NKV, HS, eps });
  const shape = `rows=${rows},NH=${NH},NKV=${NKV},HS=${HS}`;
  const weights = (engine: Engine) => ({ qWeight: upload(engine, 'qWeight', qWeight), kWeight: upload(engine, 'kWeight', kWeight) });
  return [
    {
      op: 'head-rmsnorm', kernel: 'head-rmsnorm forward', shape, bytes: F32_BYTES * (2 * rows * W + 2 * HS + rows * (NH + NKV)),
      reference: () => headRmsnormForwardRef({ qkv, qWeight, kWeight, rows, NH, NKV, HS, eps }),
      setup: (engine) => {
        const t = { qkv: upload(engine, 'qkv', qkv), ...weights(engine) };
        const out = engine.tensor('bench-out', [rows * W]);
        const rstdTensor = engine.tensor('bench-rstd', [rows * (NH + NKV)]);
        return () => headRmsnormForward(engine, { ...t, out, rstd: rstdTensor, rows, NH, NKV, HS, eps });
      },
    },
    {
      op: 'head-rmsnorm', kernel: 'head-rmsnorm backward', shape, bytes: F32_BYTES * (3 * rows * W + rows * (NH + NKV) + 6 * HS),
      reference: () => headRmsnormBackwardRef({ qkv, qWeight, kWeight, rstd, dOut, rows, NH, NKV, HS }),
      setup: (engine) => {
        const t = { qkv: upload(engine, 'qkv', qkv), ...weights(engine), rstd: upload(engine, 'rstd', Float32Array.from(rstd)), dOut: upload(engine, 'dOut', dOut) };
        const dQkv = engine.tensor('bench-dQkv', [rows * W]);
        const dQWeight = engine.tensor('bench-dQWeight', [HS]);
        const dKWeight = engine.tensor('bench-dKWeight', [HS]);
        return () => headRmsnormBackward(engine, { ...t, dQkv, dQWeight, dKWeight, rows, NH, NKV, HS });
      },
    },
  ];
}

/** Rotary embedding of the q and k heads, in place (ropeBackward is the same shader rotating by -angle). */
export function ropeCases(): KernelBenchCase[] {
  const { numHeads: NH, numKvHeads: NKV, headDim: HS, ropeTheta: theta } = MODEL;
  const rows = ROWS;
  const qkv = randomValues(rows * qkvWidth(MODEL), 11);
  const positions = Int32Array.from({ length: rows }, (_, r) => r % T);
  return [{
    op: 'rope', kernel: 'rope', shape: `rows=${rows},NH=${NH},NKV=${NKV},HS=${HS}`, bytes: F32_BYTES * (2 * rows * (NH + NKV) * HS + rows),
    reference: () => ropeForwardRef({ qkv, positions, rows, NH, NKV, HS, theta }),
    setup: (engine) => {
      const qkvTensor = upload(engine, 'qkv', qkv);
      const positionsTensor = engine.tensorFrom('bench-positions', [rows], positions, 'i32');
      return () => ropeForward(engine, { qkv: qkvTensor, positions: positionsTensor, rows, NH, NKV, HS, theta });
    },
  }];
}

/** Causal grouped-query attention over the fused qkv rows, as the trunk calls it (no padding). FLOPs are the
 *  causal QKᵀ and PV products; the backward counts twice the forward's (dQ, dK, dV, dP), not its recomputation. */
export function attentionCases(): KernelBenchCase[] {
  const { numHeads: NH, numKvHeads: NKV, headDim: HS } = MODEL;
  const W = qkvWidth(MODEL);
  const dims: AttentionDims = {
    B, Tq: T, Tk: T, NH, NKV, HS,
    qRowStride: W, qColOffset: 0, kRowStride: W, kColOffset: NH * HS, vRowStride: W, vColOffset: (NH + NKV) * HS,
    kvBatchStride: T * W, queryStart: 0, scale: 1 / Math.sqrt(HS),
  };
  const qkv = randomValues(ROWS * W, 12);
  const keyMask = new Uint32Array(B * T).fill(1);
  const dOut = randomValues(ROWS * NH * HS, 13);
  const forwardFlops = 2 * 2 * B * NH * HS * ((T * (T + 1)) / 2);
  const shape = `B=${B},T=${T},NH=${NH},NKV=${NKV},HS=${HS}`;
  const forward = (engine: Engine) => {
    const t = { q: upload(engine, 'qkv', qkv), keyMask: engine.tensorFrom('bench-keyMask', [B * T], keyMask, 'u32') };
    const out = engine.tensor('bench-out', [ROWS * NH * HS]);
    const lse = engine.tensor('bench-lse', [B * NH * T]);
    const args = { ...dims, q: t.q, k: t.q, v: t.q, keyMask: t.keyMask, out, lse };
    return { args, run: () => attentionForward(engine, args) };
  };
  return [
    {
      op: 'attention', kernel: 'attention forward', shape, flops: forwardFlops,
      reference: () => attentionForwardRef({ ...dims, q: qkv, k: qkv, v: qkv, keyMask }),
      setup: (engine) => forward(engine).run,
    },
    {
      op: 'attention', kernel: 'attention backward', shape, flops: 2 * forwardFlops,
      reference: () => attentionBackwardRef({ ...dims, q: qkv, k: qkv, v: qkv, keyMask, dOut }),
      setup: (engine) => {
        const { args, run } = forward(engine);
        run();
        const dQkv = engine.tensor('bench-dQkv', [ROWS * W]);
        const dOutTensor = upload(engine, 'dOut', dOut);
        return () => attentionBackward(engine, { ...args, dOut: dOutTensor, dq: dQkv, dk: dQkv, dv: dQkv });
      },
    },
  ];
}

/** SwiGLU of the fused gate/up rows. */
export function swigluCases(): KernelBenchCase[] {
  const { intermediateSize: I } = MODEL;
  const rows = ROWS;
  const gateUp = randomValues(rows * 2 * I, 14);
  const dOut = randomValues(rows * I, 15);
  const shape = `rows=${rows},I=${I}`;
  return [
    {
      op: 'swiglu', kernel: 'swiglu forward', shape, bytes: F32_BYTES * 3 * rows * I,
      reference: () => swigluForwardRef({ gateUp, rows, I }),
      setup: (engine) => {
        const gateUpTensor = upload(engine, 'gateUp', gateUp);
        const out = engine.tensor('bench-out', [rows * I]);
        return () => swigluForward(engine, { gateUp: gateUpTensor, out, rows, I });
      },
    },
    {
      op: 'swiglu', kernel: 'swiglu backward', shape, bytes: F32_BYTES * 5 * rows * I,
      reference: () => swigluBackwardRef({ gateUp, dOut, rows, I }),
      setup: (engine) => {
        const t = { gateUp: upload(engine, 'gateUp', gateUp), dOut: upload(engine, 'dOut', dOut) };
        const dGateUp = engine.tensor('bench-dGateUp', [rows * 2 * I]);
        return () => swigluBackward(engine, { ...t, dGateUp, rows, I });
      },
    },
  ];
}

/** The fused LM head (log-probs and entropies of the targets). FLOPs are its matmuls: the logits (2NVC) forward;
 *  logits again, dHidden and dWeight backward, which gets the forward's entropy and an entropy gradient (PPO). */
export function lmHeadCases(): KernelBenchCase[] {
  const { hiddenSize: C, vocabSize: V } = MODEL;
  const N = ROWS;
  const hidden = randomValues(N * C, 16);
  const weight = randomValues(V * C, 17, 0.1);
  const targets = randomIds(N, 18, V);
  const dLogprobs = randomValues(N, 19);
  const dEntropy = randomValues(N, 20, 0.01);
  const shape = `N=${N},C=${C},V=${V}`;
  const forward = (engine: Engine) => {
    const args = {
      hidden: upload(engine, 'hidden', hidden), weight: upload(engine, 'weight', weight),
      targets: engine.tensorFrom('bench-targets', [N], targets, 'u32'), N, C, V, temperature: 1,
      logprobs: engine.tensor('bench-logprobs', [N]), entropy: engine.tensor('bench-entropy', [N]), lse: engine.tensor('bench-lse', [N]),
    };
    return { args, run: () => lmHeadForward(engine, args) };
  };
  const reference = { hidden, weight, targets, N, C, V, temperature: 1 };
  return [
    {
      op: 'lm-head', kernel: 'lm-head forward', shape, flops: 2 * N * V * C,
      reference: () => lmHeadForwardRef(reference),
      setup: (engine) => forward(engine).run,
    },
    {
      op: 'lm-head', kernel: 'lm-head backward', shape, flops: 6 * N * V * C,
      reference: () => lmHeadBackwardRef({ ...reference, dLogprobs, dEntropy }),
      setup: (engine) => {
        const { args, run } = forward(engine);
        run();
        const grads = {
          dLogprobs: upload(engine, 'dLogprobs', dLogprobs), dEntropy: upload(engine, 'dEntropy', dEntropy),
          dHidden: engine.tensor('bench-dHidden', [N * C]), dWeight: engine.tensor('bench-dWeight', [V * C]),
        };
        return () => lmHeadBackward(engine, { ...args, ...grads });
      },
    },
  ];
}

/** The critic's scalar head over hidden rows. */
export function valueHeadCases(): KernelBenchCase[] {
  const { hiddenSize: C } = MODEL;
  const N = ROWS;
  const hidden = randomValues(N * C, 21);
  const weight = randomValues(C, 22);
  const bias = randomValues(1, 23);
  const dValues = randomValues(N, 24);
  const shape = `N=${N},C=${C}`;
  return [
    {
      op: 'value-head', kernel: 'value-head forward', shape, bytes: F32_BYTES * (N * C + C + 1 + N),
      reference: () => valueHeadForwardRef({ hidden, weight, bias, N, C }),
      setup: (engine) => {
        const t = { hidden: upload(engine, 'hidden', hidden), weight: upload(engine, 'weight', weight), bias: upload(engine, 'bias', bias) };
        const values = engine.tensor('bench-values', [N]);
        return () => valueHeadForward(engine, { ...t, values, N, C });
      },
    },
    {
      op: 'value-head', kernel: 'value-head backward', shape, bytes: F32_BYTES * (2 * N * C + N + 3 * C + 2),
      reference: () => valueHeadBackwardRef({ hidden, weight, dValues, N, C }),
      setup: (engine) => {
        const t = { hidden: upload(engine, 'hidden', hidden), weight: upload(engine, 'weight', weight), dValues: upload(engine, 'dValues', dValues) };
        const grads = { dHidden: engine.tensor('bench-dHidden', [N * C]), dWeight: engine.tensor('bench-dWeight', [C]), dBias: engine.tensor('bench-dBias', [1]) };
        return () => valueHeadBackward(engine, { ...t, ...grads, N, C });
      },
    },
  ];
}

/** The optimizer step over one arena segment of 2^20 parameters (the tiny model has about 0.9M): the global
 *  gradient norm, then AdamW with clipping (params, m, v read and written, grads read). */
export function adamwCases(): KernelBenchCase[] {
  const n = 1 << 20;
  const grads = randomValues(n, 25, 1e-3);
  const params = Float64Array.from(randomValues(n, 26, 0.1));
  const m = Float64Array.from(randomValues(n, 27, 1e-3));
  const v = Float64Array.from(randomValues(n, 28, 1e-3), (x) => x * x);
  const hyper = { maxNorm: 1, lr: 1e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.01, step: 1 };
  const normSquared = gradNormSquaredRef([grads]);
  const shape = `n=${n}`;
  const setupGrads = (engine: Engine) => {
    const gradsTensor = upload(engine, 'grads', grads);
    const normSquaredTensor = engine.tensor('bench-normSquared', [1]);
    gradNormSquared(engine, { grads: [gradsTensor], normSquared: normSquaredTensor });
    return { grads: gradsTensor, normSquared: normSquaredTensor };
  };
  return [
    {
      op: 'reduce', kernel: 'grad norm', shape, bytes: F32_BYTES * (n + 1),
      reference: () => gradNormSquaredRef([grads]),
      setup: (engine) => {
        const t = setupGrads(engine);
        return () => gradNormSquared(engine, { grads: [t.grads], normSquared: t.normSquared });
      },
    },
    {
      op: 'adamw', kernel: 'adamw step', shape, bytes: F32_BYTES * (7 * n + 1),
      reference: () => adamwStepRef({ params, grads, m, v, normSquared, ...hyper }),
      setup: (engine) => {
        const t = {
          ...setupGrads(engine), params: upload(engine, 'params', Float32Array.from(params)),
          m: upload(engine, 'm', Float32Array.from(m)), v: upload(engine, 'v', Float32Array.from(v)),
        };
        return () => adamwStep(engine, { ...t, ...hyper });
      },
    },
  ];
}

/** The SFT loss's deterministic single-workgroup dot product of per-token log-probs and weights. */
export function weightedSumCases(): KernelBenchCase[] {
  const n = ROWS;
  const values = randomValues(n, 29);
  const weights = randomValues(n, 30);
  return [{
    op: 'reduce', kernel: 'weighted sum', shape: `n=${n}`, bytes: F32_BYTES * (2 * n + 1),
    reference: () => weightedSumRef({ values, weights, n }),
    setup: (engine) => {
      const t = { values: upload(engine, 'values', values), weights: upload(engine, 'weights', weights) };
      const out = engine.tensor('bench-out', [1]);
      return () => weightedSum(engine, { ...t, out, n });
    },
  }];
}

/** PPO's per-token kernels over a rollout batch of PPO_B responses of PPO_T tokens (ragged, by mask). */
export function ppoCases(): KernelBenchCase[] {
  const [Bp, Tp] = [PPO_B, PPO_T];
  const n = Bp * Tp;
  const mask = responseMask(31);
  const oldLogProb = randomValues(n, 32).map((x) => x - 1);
  const logProb = oldLogProb.map((x, i) => x + 0.05 * Math.sin(i));
  const refLogProb = oldLogProb.map((x, i) => x + 0.05 * Math.cos(i));
  const advantages = randomValues(n, 33);
  const entropy = randomValues(n, 34).map(Math.abs);
  const values = randomValues(n, 35);
  const vpreds = values.map((x, i) => x + 0.5 * Math.sin(i));
  const returns = randomValues(n, 36);
  const rewards = randomValues(n, 37);
  const aggregation = localAggregation('token-mean', mask, Bp, Tp);
  const policyConfig: PolicyLossConfig = { lossMode: 'vanilla', clipRatioLow: 0.2, clipRatioHigh: 0.28, clipRatioC: 3 };
  const actorTerms = { entropyCoeff: 1e-3, klLossCoef: 1e-3, klLossType: 'low_var_kl' };
  const groups = groupLayout(Array.from({ length: Bp }, (_, b) => b >> 3));
  const shape = `B=${Bp},T=${Tp}`;
  return [
    {
      op: 'policy-loss', kernel: 'policy loss', shape, bytes: F32_BYTES * (8 * n + 8 * Bp + 8),
      reference: () => computeActorLossRef({
        oldLogProb, logProb, advantages, responseMask: mask, B: Bp, T: Tp, config: policyConfig, aggregation,
        terms: { ...actorTerms, entropy, refLogProb },
      }),
      setup: (engine) => {
        const t = {
          oldLogProb: upload(engine, 'oldLogProb', oldLogProb), logProb: upload(engine, 'logProb', logProb),
          advantages: upload(engine, 'advantages', advantages), responseMask: upload(engine, 'mask', mask),
          entropy: upload(engine, 'entropy', entropy), refLogProb: upload(engine, 'refLogProb', refLogProb),
          grads: engine.tensor('bench-grads', [n * 2]), rowPartials: engine.tensor('bench-rowPartials', [Bp * 8]), out: engine.tensor('bench-out', [8]),
        };
        return () => computeActorLossGpu(engine, t, { config: policyConfig, aggregation, ...actorTerms, B: Bp, T: Tp });
      },
    },
    {
      op: 'value-loss', kernel: 'value loss', shape, bytes: F32_BYTES * (5 * n + 3 * Bp + 3),
      reference: () => computeValueLossRef({ vpreds, returns, values, responseMask: mask, cliprangeValue: 0.5, B: Bp, T: Tp, aggregation }),
      setup: (engine) => {
        const t = {
          vpreds: upload(engine, 'vpreds', vpreds), returns: upload(engine, 'returns', returns), values: upload(engine, 'values', values),
          responseMask: upload(engine, 'mask', mask), gradVpreds: engine.tensor('bench-gradVpreds', [n]),
          rowPartials: engine.tensor('bench-rowPartials', [Bp * 3]), out: engine.tensor('bench-out', [3]),
        };
        return () => computeValueLossGpu(engine, { ...t, cliprangeValue: 0.5, aggregation, B: Bp, T: Tp });
      },
    },
    {
      op: 'gae', kernel: 'gae', shape, bytes: F32_BYTES * 5 * n,
      reference: () => computeGaeAdvantageReturnRef({ tokenLevelRewards: rewards, values, responseMask: mask, gamma: 1, lam: 0.95, B: Bp, T: Tp }),
      setup: (engine) => {
        const t = {
          tokenLevelRewards: upload(engine, 'rewards', rewards), values: upload(engine, 'values', values), responseMask: upload(engine, 'mask', mask),
          advantages: engine.tensor('bench-advantages', [n]), returns: engine.tensor('bench-returns', [n]), stats: engine.tensor('bench-stats', [4]),
        };
        return () => computeGaeAdvantageReturnGpu(engine, { ...t, gamma: 1, lam: 0.95, B: Bp, T: Tp });
      },
    },
    {
      op: 'advantage-outcome', kernel: 'grpo advantage', shape: `${shape},group=8`, bytes: F32_BYTES * (3 * n + 2 * Bp + groups.groupStart.length),
      reference: () => computeOutcomeAdvantageRef('grpo', {
        tokenLevelRewards: rewards, responseMask: mask, groupOf: groups.groupOf, epsilon: 1e-6, normAdvByStd: true, B: Bp, T: Tp,
      }),
      setup: (engine) => {
        const t = {
          tokenLevelRewards: upload(engine, 'rewards', rewards), responseMask: upload(engine, 'mask', mask), ...groupTensors(engine, groups),
          rowStats: engine.tensor('bench-rowStats', [2 * Bp]), stats: engine.tensor('bench-stats', [4]), advantages: engine.tensor('bench-advantages', [n]),
        };
        return () => computeOutcomeAdvantageGpu(engine, 'grpo', { ...t, epsilon: 1e-6, normAdvByStd: true, B: Bp, T: Tp });
      },
    },
    {
      op: 'apply-kl-penalty', kernel: 'apply kl penalty', shape, bytes: F32_BYTES * (5 * n + Bp),
      reference: () => applyKlPenaltyRef({
        tokenLevelScores: rewards, oldLogProbs: oldLogProb, refLogProb, responseMask: mask, beta: 1e-3, klPenalty: 'kl', B: Bp, T: Tp,
      }),
      setup: (engine) => {
        const t = {
          tokenLevelScores: upload(engine, 'scores', rewards), oldLogProbs: upload(engine, 'oldLogProb', oldLogProb),
          refLogProb: upload(engine, 'refLogProb', refLogProb), responseMask: upload(engine, 'mask', mask),
          tokenLevelRewards: engine.tensor('bench-rewards', [n]), rowKl: engine.tensor('bench-rowKl', [Bp]),
        };
        return () => applyKlPenaltyGpu(engine, { ...t, beta: 1e-3, klPenalty: 'kl', B: Bp, T: Tp });
      },
    },
  ];
}

const CASES: (() => KernelBenchCase[])[] = [
  matmulCases, embeddingCases, rmsnormCases, headRmsnormCases, ropeCases, attentionCases, swigluCases, lmHeadCases,
  valueHeadCases, adamwCases, weightedSumCases, ppoCases,
];

export async function benchmarkKernels(engine: Engine): Promise<KernelBenchRow[]> {
  const rows: KernelBenchRow[] = [];
  for (const benchCase of CASES.flatMap((cases) => cases())) {
    const run = benchCase.setup(engine);
    const time = (samples?: number) =>
      timeKernel(engine, benchCase.kernel, benchCase.shape, run, { flops: benchCase.flops, bytes: benchCase.bytes, samples });
    const row = await time();
    if (benchCase.naiveVariant) {
      const naive = await withVariant(engine, benchCase.op, benchCase.naiveVariant, () => time(3));
      row.vs_naive = naive.ms / row.ms;
    }
    if (benchCase.reference) row.vs_cpu = timeReference(benchCase.reference) / row.ms;
    rows.push(row);
  }
  return rows;
}
