// The fused LM head: log-probabilities of the targets, entropies and their gradients from hidden states and the
// unembedding, one vocabulary chunk at a time, so the (N, V) logits never exist whole (V reaches 150k).
import lmHeadSource from './lm-head.wgsl';
import lmHeadLogitsSource from './lm-head-logits.wgsl';
import {
  type Engine,
  type Tensor,
  type KernelSpec,
  chooseVariant,
  foldWorkgroups,
  rowsPerWindow,
  expectSize,
  partRanges,
} from '../../engine/index.ts';
import type { Variant } from '../../engine/variants.ts';
import { shaderSource, specsByWidth, vectorElementType, widestVector, type VectorWidth } from '../util/rowwise.ts';
import { matmul } from '../matmul/matmul.ts';
import { scratchTensor } from '../util/scratch.ts';

export { weightedSum } from '../util/reduce.ts';

/** Chunk boundaries are multiples of this many vocabulary rows, so every weight chunk starts 256-byte aligned
 *  (64 rows of C floats are 256·C bytes). */
const CHUNK_ALIGN = 64;
/** Upper bound on the (N, chunk) logits scratch: large chunks mean few dispatches, but it is pure scratch. */
const SCRATCH_BYTES = 32 << 20;

// vecU and COMPONENT for the one-hot of the target column inside a vecN (see lm-head.wgsl).
const COLUMN_PRELUDES: Record<VectorWidth, string> = {
  4: 'alias vecU = vec4<u32>;\nconst COMPONENT = vecU(0u, 1u, 2u, 3u);\n',
  1: 'alias vecU = u32;\nconst COMPONENT = 0u;\n',
};

type StatsVariant = 'row-per-workgroup' | 'row-per-lane';

const statsSpecs = (variant: StatsVariant) =>
  specsByWidth(
    (width): KernelSpec => ({
      name: `lm-head/stats-${variant}-vec${width}`,
      source: COLUMN_PRELUDES[width] + shaderSource('lm-head', lmHeadSource, 'stats', width),
      entryPoint: `stats_${variant.replaceAll('-', '_')}`,
      bindings: [
        { name: 'logits', access: 'read', type: vectorElementType(width) },
        { name: 'targets', access: 'read', type: 'u32' },
        { name: 'rowStats', access: 'read_write', type: 'vec4<f32>' },
        { name: 'logprobs', access: 'read_write' },
        { name: 'entropy', access: 'read_write' },
        { name: 'lse', access: 'read_write' },
      ],
      uniforms: [
        { name: 'rows', type: 'u32' },
        { name: 'width', type: 'u32' },
        { name: 'v0', type: 'u32' },
        { name: 'invTemperature', type: 'f32' },
        { name: 'first', type: 'u32' },
        { name: 'last', type: 'u32' },
      ],
    }),
  );

/** Rows per stats workgroup of each variant (WG in lm-head.wgsl for row-per-lane). */
export const lmHeadStatsVariants: readonly Variant<{
  specs: ReturnType<typeof statsSpecs>;
  rowsPerWorkgroup: number;
}>[] = [
  {
    name: 'row-per-lane',
    supported: (caps) => caps.deviceClass === 'cpu',
    value: { specs: statsSpecs('row-per-lane'), rowsPerWorkgroup: 64 },
  },
  {
    name: 'row-per-workgroup',
    supported: () => true,
    value: { specs: statsSpecs('row-per-workgroup'), rowsPerWorkgroup: 1 },
  },
];

const dlogitsSpecs = specsByWidth(
  (width): KernelSpec => ({
    name: `lm-head/dlogits-vec${width}`,
    source: COLUMN_PRELUDES[width] + shaderSource('lm-head', lmHeadSource, 'dlogits', width),
    entryPoint: 'dlogits',
    bindings: [
      { name: 'logits', access: 'read_write', type: vectorElementType(width) },
      { name: 'targets', access: 'read', type: 'u32' },
      { name: 'lse', access: 'read' },
      { name: 'entropy', access: 'read' },
      { name: 'dLogprobs', access: 'read' },
      { name: 'dEntropy', access: 'read' },
    ],
    uniforms: [
      { name: 'rows', type: 'u32' },
      { name: 'width', type: 'u32' },
      { name: 'v0', type: 'u32' },
      { name: 'invTemperature', type: 'f32' },
      { name: 'useEntropy', type: 'u32' },
    ],
  }),
);

const placeSpec: KernelSpec = {
  name: 'lm-head/place',
  source: COLUMN_PRELUDES[1] + shaderSource('lm-head', lmHeadSource, 'place', 1),
  entryPoint: 'place',
  bindings: [
    { name: 'logits', access: 'read' },
    { name: 'out', access: 'read_write' },
  ],
  uniforms: [
    { name: 'rows', type: 'u32' },
    { name: 'width', type: 'u32' },
    { name: 'v0', type: 'u32' },
    { name: 'V', type: 'u32' },
  ],
};

const sumPiSquaredSpec: KernelSpec = {
  name: 'lm-head/sum-pi-squared',
  source: COLUMN_PRELUDES[1] + shaderSource('lm-head', lmHeadSource, 'sum-pi-squared', 1),
  entryPoint: 'sum_pi_squared',
  bindings: [
    { name: 'lse', access: 'read' },
    { name: 'lseDoubled', access: 'read' },
    { name: 'sumPiSquared', access: 'read_write' },
  ],
  uniforms: [{ name: 'rows', type: 'u32' }],
};

interface LmHeadShape {
  hidden: Tensor; // (N, C)
  weight: Tensor; // (V, C)
  targets: Tensor; // (N) u32
  N: number;
  C: number;
  V: number;
  temperature: number;
  /** Vocabulary rows per chunk (a multiple of 64, or ≥ V); by default as many as fit the scratch budget. */
  chunkSize?: number;
  /** (N, V), for a vocabulary of one chunk (lmHeadLogitsFitOneChunk): the forward leaves its logits here, and a
   *  backward given the same tensor reads them instead of recomputing the matmul (and overwrites them). */
  savedLogits?: Tensor;
}

function checkShape(launcher: string, a: LmHeadShape): void {
  const { N, C, V } = a;
  expectSize(launcher, 'hidden', a.hidden, N * C, `[N=${N}, C=${C}]`);
  expectSize(launcher, 'weight', a.weight, V * C, `[V=${V}, C=${C}]`);
  expectSize(launcher, 'targets', a.targets, N, `[N=${N}]`);
  if (a.targets.dtype !== 'u32')
    throw new Error(`${launcher}: targets (tensor ${a.targets.name}) is ${a.targets.dtype}, expected u32`);
  if (!(a.temperature > 0)) throw new Error(`${launcher}: temperature is ${a.temperature}, expected > 0`);
}

/** Vocabulary rows per chunk of N rows of hidden C (the bench times matmuls in the same chunks). */
export function lmHeadChunkWidth(engine: Engine, N: number, C: number, V: number): number {
  return chunkWidth(engine, 'lmHeadChunkWidth', N, C, V);
}

/** Whether lmHeadForward's logits for N rows fit one chunk, so a training step can keep them for the backward
 *  (savedLogits): one matmul fewer per step, for N·V floats of memory. */
export function lmHeadLogitsFitOneChunk(engine: Engine, N: number, C: number, V: number): boolean {
  return lmHeadChunkWidth(engine, N, C, V) >= V;
}

/** Vocabulary rows per chunk: all of V when the (N, V) logits fit the scratch budget and the weight one binding,
 *  else the most that do. */
function chunkWidth(engine: Engine, launcher: string, N: number, C: number, V: number, chunkSize?: number): number {
  if (chunkSize !== undefined) {
    if (!Number.isInteger(chunkSize) || chunkSize <= 0 || (chunkSize < V && chunkSize % CHUNK_ALIGN !== 0)) {
      throw new Error(`${launcher}: chunkSize is ${chunkSize}, expected a multiple of ${CHUNK_ALIGN} (or ≥ V=${V})`);
    }
    return Math.min(chunkSize, V);
  }
  return lmHeadDefaultChunkWidth(N, C, V, engine.maxBindingBytes, engine.caps.minStorageBufferOffsetAlignment);
}

/** chunkWidth's default from the device's binding limit and offset alignment alone (the memory plan sizes the
 *  (N, chunk) logits scratch with it before an engine exists). */
export function lmHeadDefaultChunkWidth(
  N: number,
  C: number,
  V: number,
  maxBindingBytes: number,
  alignBytes: number,
): number {
  const budget = Math.min(SCRATCH_BYTES, maxBindingBytes / 4);
  const scratchRows = Math.floor(budget / (4 * N) / CHUNK_ALIGN) * CHUNK_ALIGN;
  const bindableRows = Math.floor(rowsPerWindow(C, maxBindingBytes, alignBytes) / CHUNK_ALIGN) * CHUNK_ALIGN;
  return Math.min(Math.max(CHUNK_ALIGN, Math.min(scratchRows, bindableRows)), V);
}

/** Calls `body` for each vocabulary chunk with its first row v0, its width, and the logits scratch viewed as (N, width)
 *  — or `saved` (N, V), checked to be the only chunk. No chunk straddles two parts of a weight in `weights` (one
 *  above maxBufferSize is split on whole rows across buffers, engine/arena.ts): chunks restart at each part. */
function forEachChunk(
  engine: Engine,
  launcher: string,
  { N, C, V }: { N: number; C: number; V: number },
  chunk: number,
  saved: Tensor | undefined,
  weights: readonly Tensor[],
  body: (v0: number, width: number, logits: Tensor) => void,
): void {
  if (saved) {
    if (chunk < V)
      throw new Error(
        `${launcher}: savedLogits (tensor ${saved.name}) needs the vocabulary in one chunk, but V=${V} takes chunks ` +
          `of ${chunk}`,
      );
    expectSize(launcher, 'savedLogits', saved, N * V, `[N=${N}, V=${V}]`);
    body(0, V, saved.view(saved.name, 0, [N, V]));
    return;
  }
  const scratch = scratchTensor(engine, 'lm-head/logits', [N * chunk]);
  const cuts = [...new Set([V, ...weights.flatMap((w) => partRanges(w).map((part) => part.first / C))])];
  cuts.sort((a, b) => a - b);
  let start = 0;
  for (const end of cuts) {
    for (let v0 = start; v0 < end; v0 += chunk) {
      const width = Math.min(chunk, end - v0);
      body(v0, width, scratch.view(`lm-head/logits[${v0}:${v0 + width}]`, 0, [N, width]));
    }
    start = end;
  }
}

/** The weight rows [v0, v0 + width) as a (width, C) tensor. */
function weightRows(weight: Tensor, v0: number, width: number, C: number): Tensor {
  return weight.view(`${weight.name}[${v0}:${v0 + width}]`, v0 * C, [width, C]);
}

/**
 * Per row n of z = hidden·weightᵀ / temperature: lse[n] = logsumexp(z[n, :]), logprobs[n] = z[n, targets[n]] − lse[n],
 * entropy[n] = lse[n] − Σ softmax(z[n, :])·z[n, :]. hidden (N, C), weight (V, C), targets (N) u32, outputs (N).
 * With `sumPiSquared` (N) also Σ_v softmax(z[n, :])_v² (verl's calculate_sum_pi_squared): one more stats pass per
 * chunk and one small dispatch, scratch only then; without it the forward is unchanged.
 */
export function lmHeadForward(
  engine: Engine,
  a: LmHeadShape & { logprobs: Tensor; entropy: Tensor; lse: Tensor; sumPiSquared?: Tensor },
): void {
  const { hidden, weight, targets, logprobs, entropy, lse, sumPiSquared, N, C, V } = a;
  checkShape('lmHeadForward', a);
  expectSize('lmHeadForward', 'logprobs', logprobs, N, `[N=${N}]`);
  expectSize('lmHeadForward', 'entropy', entropy, N, `[N=${N}]`);
  expectSize('lmHeadForward', 'lse', lse, N, `[N=${N}]`);
  if (sumPiSquared) expectSize('lmHeadForward', 'sumPiSquared', sumPiSquared, N, `[N=${N}]`);
  const chunk = chunkWidth(engine, 'lmHeadForward', N, C, V, a.chunkSize);
  const stats = chooseVariant('lm-head', lmHeadStatsVariants, engine.caps, engine.knobs).value;
  const statsOutputs = { rowStats: scratchTensor(engine, 'lm-head/row-stats', [N * 4]), logprobs, entropy, lse };
  // The statistics of 2z: only their lse is read; the rest is scratch the stats kernel writes anyway.
  const doubled = sumPiSquared
    ? {
        rowStats: scratchTensor(engine, 'lm-head/row-stats-doubled', [N * 4]),
        lse: scratchTensor(engine, 'lm-head/lse-doubled', [N]),
        logprobs: scratchTensor(engine, 'lm-head/logprobs-doubled', [N]),
        entropy: scratchTensor(engine, 'lm-head/entropy-doubled', [N]),
      }
    : null;
  forEachChunk(engine, 'lmHeadForward', a, chunk, a.savedLogits, [weight], (v0, width, logits) => {
    matmul(engine, { a: hidden, b: weightRows(weight, v0, width, C), out: logits, M: N, N: width, K: C, layout: 'nt' });
    const passes = doubled
      ? ([
          [statsOutputs, 1],
          [doubled, 2],
        ] as const)
      : ([[statsOutputs, 1]] as const);
    for (const [outputs, scale] of passes) {
      engine.dispatch(stats.specs[widestVector(width)], {
        bindings: { logits, targets, ...outputs },
        uniforms: {
          rows: N,
          width,
          v0,
          invTemperature: scale / a.temperature,
          first: Number(v0 === 0),
          last: Number(v0 + width === V),
        },
        workgroups: foldWorkgroups(Math.ceil(N / stats.rowsPerWorkgroup)),
      });
    }
  });
  if (sumPiSquared && doubled) {
    engine.dispatch(sumPiSquaredSpec, {
      bindings: { lse, lseDoubled: doubled.lse, sumPiSquared },
      uniforms: { rows: N },
      workgroups: foldWorkgroups(Math.ceil(N / 256)),
    });
  }
}

/**
 * Gradients of Σ dLogprobs·logprobs + Σ dEntropy·entropy (dEntropy null: no entropy term) through lmHeadForward.
 * dHidden (N, C) is overwritten unless accumulateDHidden; dWeight (V, C) is always added to (tied embeddings add there
 * too); null for a frozen head (LoRA), which skips its matmuls. With dEntropy, pass the forward's `entropy` to save
 * recomputing it (one more pass over the logits). Rows whose upstream gradients are both 0 (padding) contribute
 * nothing.
 */
export function lmHeadBackward(
  engine: Engine,
  a: LmHeadShape & {
    lse: Tensor;
    dLogprobs: Tensor;
    dEntropy: Tensor | null;
    dHidden: Tensor;
    dWeight: Tensor | null;
    accumulateDHidden?: boolean;
    entropy?: Tensor;
  },
): void {
  const { hidden, weight, targets, lse, dLogprobs, dEntropy, dHidden, dWeight, N, C, V } = a;
  checkShape('lmHeadBackward', a);
  expectSize('lmHeadBackward', 'lse', lse, N, `[N=${N}]`);
  expectSize('lmHeadBackward', 'dLogprobs', dLogprobs, N, `[N=${N}]`);
  if (dEntropy) expectSize('lmHeadBackward', 'dEntropy', dEntropy, N, `[N=${N}]`);
  expectSize('lmHeadBackward', 'dHidden', dHidden, N * C, `[N=${N}, C=${C}]`);
  if (dWeight) expectSize('lmHeadBackward', 'dWeight', dWeight, V * C, `[V=${V}, C=${C}]`);
  const chunk = chunkWidth(engine, 'lmHeadBackward', N, C, V, a.chunkSize);

  // Unused bindings take a stand-in that is read-only here; useEntropy = 0 keeps the kernel from reading them.
  let entropy = a.entropy ?? lse;
  if (dEntropy && !a.entropy) {
    entropy = scratchTensor(engine, 'lm-head/entropy', [N]);
    lmHeadForward(engine, {
      ...a,
      chunkSize: chunk,
      entropy,
      logprobs: scratchTensor(engine, 'lm-head/logprobs', [N]),
      lse: scratchTensor(engine, 'lm-head/lse', [N]),
    });
  } else if (a.entropy) {
    expectSize('lmHeadBackward', 'entropy', a.entropy, N, `[N=${N}]`);
  }

  forEachChunk(
    engine,
    'lmHeadBackward',
    a,
    chunk,
    a.savedLogits,
    dWeight ? [weight, dWeight] : [weight],
    (v0, width, logits) => {
      const weightChunk = weightRows(weight, v0, width, C);
      if (!a.savedLogits)
        matmul(engine, { a: hidden, b: weightChunk, out: logits, M: N, N: width, K: C, layout: 'nt' });
      engine.dispatch(dlogitsSpecs[widestVector(width)], {
        bindings: { logits, targets, lse, entropy, dLogprobs, dEntropy: dEntropy ?? dLogprobs },
        uniforms: { rows: N, width, v0, invTemperature: 1 / a.temperature, useEntropy: Number(dEntropy !== null) },
        workgroups: foldWorkgroups(N),
      });
      matmul(engine, {
        a: logits,
        b: weightChunk,
        out: dHidden,
        M: N,
        N: C,
        K: width,
        layout: 'nn',
        accumulate: v0 > 0 || !!a.accumulateDHidden,
      });
      if (dWeight) {
        matmul(engine, {
          a: logits,
          b: hidden,
          out: weightRows(dWeight, v0, width, C),
          M: width,
          N: C,
          K: N,
          layout: 'tn',
          accumulate: true,
        });
      }
    },
  );
}

const decodeLogitsSpec: KernelSpec = {
  name: 'lm-head/logits-decode',
  source: lmHeadLogitsSource,
  bindings: [
    { name: 'hidden', access: 'read', type: 'vec4<f32>' },
    { name: 'weight', access: 'read', type: 'vec4<f32>' },
    { name: 'out', access: 'read_write' },
  ],
  uniforms: [
    { name: 'N', type: 'u32' },
    { name: 'C', type: 'u32' },
    { name: 'V', type: 'u32' },
    { name: 'v0', type: 'u32' },
    { name: 'width', type: 'u32' },
  ],
};

/** Weight rows and rows of hidden per workgroup of lm-head-logits.wgsl. */
const LOGITS_BLOCK = { weightRows: 32, rows: 4 } as const;

type LogitsArgs = { hidden: Tensor; weight: Tensor; out: Tensor; N: number; C: number; V: number };

/**
 * The general route: matmul, through the chunked scratch and a placement pass when the weight needs several bindings.
 */
function logitsByMatmul(engine: Engine, a: LogitsArgs): void {
  const { hidden, weight, out, N, C, V } = a;
  if (weight.byteLength <= engine.maxBindingBytes) {
    matmul(engine, { a: hidden, b: weight, out, M: N, N: V, K: C, layout: 'nt' });
    return;
  }
  forEachChunk(
    engine,
    'lmHeadLogits',
    a,
    chunkWidth(engine, 'lmHeadLogits', N, C, V),
    undefined,
    [weight],
    (v0, width, logits) => {
      matmul(engine, {
        a: hidden,
        b: weightRows(weight, v0, width, C),
        out: logits,
        M: N,
        N: width,
        K: C,
        layout: 'nt',
      });
      engine.dispatch(placeSpec, {
        bindings: { logits, out },
        uniforms: { rows: N, width, v0, V },
        workgroups: foldWorkgroups(Math.ceil((N * width) / 256)),
      });
    },
  );
}

/** lm-head-logits.wgsl: one dispatch per binding window of the weight, written straight into out. */
function logitsForDecode(engine: Engine, a: LogitsArgs): void {
  const { hidden, weight, out, N, C, V } = a;
  for (const { firstRow, rows, tensor } of engine.bindingWindows(weight, C)) {
    const [gx, gy] = foldWorkgroups(
      Math.ceil(rows / LOGITS_BLOCK.weightRows),
      engine.caps.maxComputeWorkgroupsPerDimension,
    );
    engine.dispatch(decodeLogitsSpec, {
      bindings: { hidden, weight: tensor, out },
      uniforms: { N, C, V, v0: firstRow, width: rows },
      workgroups: [gx, gy, Math.ceil(N / LOGITS_BLOCK.rows)],
    });
  }
}

// The decode LM head: a GPU runs its matmul; on a CPU device a decode step's few rows (at most 4, C % 4 == 0, a
// float32 weight: the policy's) take the decode kernel, more rows (a validation's many slots) and half-precision
// weights the matmul, which reuses each weight load for 8 rows.
export const lmHeadLogitsVariants: readonly Variant<(engine: Engine, a: LogitsArgs) => void>[] = [
  {
    name: 'decode',
    supported: (caps) => caps.deviceClass === 'cpu',
    value: (engine, a) =>
      (a.N <= LOGITS_BLOCK.rows && a.C % 4 === 0 && a.weight.dtype === 'f32' ? logitsForDecode : logitsByMatmul)(
        engine,
        a,
      ),
  },
  { name: 'matmul', supported: () => true, value: logitsByMatmul },
];

/**
 * Full logits for a few rows (sampling, the forward tool): out (N, V) = hidden (N, C) · weight (V, C)ᵀ, no temperature.
 *  A weight larger than one binding is multiplied window by window. */
export function lmHeadLogits(engine: Engine, a: LogitsArgs): void {
  const { hidden, weight, out, N, C, V } = a;
  expectSize('lmHeadLogits', 'hidden', hidden, N * C, `[N=${N}, C=${C}]`);
  expectSize('lmHeadLogits', 'weight', weight, V * C, `[V=${V}, C=${C}]`);
  expectSize('lmHeadLogits', 'out', out, N * V, `[N=${N}, V=${V}]`);
  chooseVariant('lm-head-logits', lmHeadLogitsVariants, engine.caps, engine.knobs).value(engine, a);
}
