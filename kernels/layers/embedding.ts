import embeddingSource from './embedding.wgsl';
import {
  type Engine,
  type Tensor,
  type KernelSpec,
  type FloatDType,
  chooseVariant,
  foldWorkgroups,
  isHalf,
  expectSize,
} from '../../engine/index.ts';
import type { Variant } from '../../engine/variants.ts';
import { shaderSource, specsByWidth, vectorElementType, widestVector, type VectorWidth } from '../util/rowwise.ts';
import { unpackPairSource } from '../util/half-weights.ts';

// Must match WG in embedding.wgsl's backward.
const BACKWARD_WG = 64;

const uniforms = [
  { name: 'N', type: 'u32' },
  { name: 'V', type: 'u32' },
  { name: 'C', type: 'u32' },
  { name: 'v0', type: 'u32' },
  { name: 'rows', type: 'u32' },
] as const;

// tableAt(i): vecN i of the table's rows (i counts vecNs, as out does).
function tableLoads(dtype: FloatDType, width: VectorWidth): string {
  if (!isHalf(dtype)) return 'fn tableAt(i: u32) -> vecN { return table[i]; }\n';
  return (
    unpackPairSource(dtype) +
    (width === 4
      ? 'fn tableAt(i: u32) -> vecN { let w = table[i]; return vec4<f32>(unpackPair(w.x), unpackPair(w.y)); }\n'
      : 'fn tableAt(i: u32) -> vecN { return unpackPair(table[i / 2u])[i & 1u]; }\n')
  );
}

const forwardSpecsOf = (dtype: FloatDType) =>
  specsByWidth(
    (width): KernelSpec => ({
      name: `embedding/forward-vec${width}${dtype === 'f32' ? '' : `-${dtype}`}`,
      source: shaderSource('embedding', embeddingSource, 'forward', width) + tableLoads(dtype, width),
      entryPoint: 'forward',
      bindings: [
        { name: 'ids', access: 'read', type: 'u32' },
        {
          name: 'table',
          access: 'read',
          type: isHalf(dtype) ? (width === 4 ? 'vec2<u32>' : 'u32') : vectorElementType(width),
        },
        { name: 'out', access: 'read_write', type: vectorElementType(width) },
      ],
      uniforms,
    }),
  );

const forwardSpecs: Record<FloatDType, ReturnType<typeof forwardSpecsOf>> = {
  f32: forwardSpecsOf('f32'),
  bf16: forwardSpecsOf('bf16'),
  f16: forwardSpecsOf('f16'),
};

type BackwardVariant = 'workgroup-per-entry' | 'lane-per-entry';

const backwardSpecs = (variant: BackwardVariant) =>
  specsByWidth(
    (width): KernelSpec => ({
      name: `embedding/backward-${variant}-vec${width}`,
      source: shaderSource('embedding', embeddingSource, ['backward', `backward-${variant}`], width),
      entryPoint: 'backward',
      bindings: [
        { name: 'tokenIds', access: 'read', type: 'u32' },
        { name: 'tokenPositions', access: 'read', type: 'u32' },
        { name: 'dOut', access: 'read', type: vectorElementType(width) },
        { name: 'dTable', access: 'read_write', type: vectorElementType(width) },
      ],
      uniforms: [...uniforms, { name: 'accumulate', type: 'u32' }],
    }),
  );

// On lavapipe a workgroup per token entry pays a workgroup's fixed cost N times, though most of them exit at once
// (only the first entry of each token's run sums it): one lane per entry is several times faster there.
export const embeddingBackwardVariants: readonly Variant<{
  specs: Record<VectorWidth, KernelSpec>;
  entriesPerWorkgroup: number;
}>[] = [
  {
    name: 'lane-per-entry',
    supported: (caps) => caps.deviceClass === 'cpu',
    value: { specs: backwardSpecs('lane-per-entry'), entriesPerWorkgroup: BACKWARD_WG },
  },
  {
    name: 'workgroup-per-entry',
    supported: () => true,
    value: { specs: backwardSpecs('workgroup-per-entry'), entriesPerWorkgroup: 1 },
  },
];

/** out (N, C) = rows of table (V, C) picked by ids (N); an id >= V reads row V - 1 (ids may come from GPU sampling).
 *  The table may be bf16/f16 (a frozen model's). A table larger than one binding is read window by window (one
 *  dispatch each). */
export function embeddingForward(
  engine: Engine,
  a: { ids: Tensor<'u32'>; table: Tensor; out: Tensor; N: number; V: number; C: number },
): void {
  const { ids, table, out, N, V, C } = a;
  expectSize('embeddingForward', 'ids', ids, N, `[N=${N}]`);
  expectSize('embeddingForward', 'table', table, V * C, `[V=${V}, C=${C}]`);
  expectSize('embeddingForward', 'out', out, N * C, `[N=${N}, C=${C}]`);
  const dtype = table.dtype as FloatDType;
  if (dtype !== 'f32' && !isHalf(dtype))
    throw new Error(`embeddingForward: table (tensor ${table.name}) is ${table.dtype}, expected f32, bf16 or f16`);
  for (const window of engine.bindingWindows(table, C)) {
    engine.dispatch(forwardSpecs[dtype][widestVector(C)], {
      bindings: { ids, table: window.tensor, out },
      uniforms: { N, V, C, v0: window.firstRow, rows: window.rows },
      workgroups: foldWorkgroups(Math.ceil((N * C) / widestVector(C) / 256)),
    });
  }
}

/** The token index of the backward, built on the CPU (ids are known on the host): positions grouped by id, in
 *  increasing order within an id, and each entry's id. It makes the backward deterministic without atomics, and
 *  its size follows the tokens (2N), not the vocabulary. Throws on an id outside [0, V). */
export function buildTokenIndex(ids: ArrayLike<number>, V: number): { ids: Uint32Array; positions: Uint32Array } {
  for (let n = 0; n < ids.length; n++) {
    const id = ids[n];
    if (!Number.isInteger(id) || id < 0 || id >= V) {
      throw new Error(`buildTokenIndex: ids[${n}] = ${id} is outside the vocabulary [0, ${V})`);
    }
  }
  const positions = Uint32Array.from({ length: ids.length }, (_, n) => n).sort((a, b) => ids[a] - ids[b] || a - b);
  return { ids: positions.map((n) => ids[n]), positions };
}

/** dTable (V, C) of embeddingForward from dOut (N, C): overwritten, or added to when `accumulate` is set. */
export function embeddingBackward(
  engine: Engine,
  a: {
    tokenIds: Tensor<'u32'>;
    tokenPositions: Tensor<'u32'>;
    dOut: Tensor;
    dTable: Tensor;
    N: number;
    V: number;
    C: number;
    accumulate: boolean;
  },
): void {
  const { tokenIds, tokenPositions, dOut, dTable, N, V, C } = a;
  expectSize('embeddingBackward', 'tokenIds', tokenIds, N, `[N=${N}]`);
  expectSize('embeddingBackward', 'tokenPositions', tokenPositions, N, `[N=${N}]`);
  expectSize('embeddingBackward', 'dOut', dOut, N * C, `[N=${N}, C=${C}]`);
  expectSize('embeddingBackward', 'dTable', dTable, V * C, `[V=${V}, C=${C}]`);
  // The kernel only visits tokens that occur, so an overwrite starts from zeros.
  if (!a.accumulate) engine.clear(dTable);
  const variant = chooseVariant('embedding-backward', embeddingBackwardVariants, engine.caps, engine.knobs).value;
  for (const window of engine.bindingWindows(dTable, C)) {
    engine.dispatch(variant.specs[widestVector(C)], {
      bindings: { tokenIds, tokenPositions, dOut, dTable: window.tensor },
      uniforms: { N, V, C, v0: window.firstRow, rows: window.rows, accumulate: Number(a.accumulate) },
      workgroups: foldWorkgroups(Math.ceil(N / variant.entriesPerWorkgroup)),
    });
  }
}
