import sampleSource from './sample.wgsl';
import rowReduceSource from './row-reduce.wgsl';
import {
  type Engine,
  type Tensor,
  type KernelSpec,
  type RowWindow,
  chooseVariant,
  expectSize,
} from '../../engine/index.ts';
import type { Variant } from '../../engine/variants.ts';

const specOfWidth = (WG: number): KernelSpec => ({
  name: `sample/wg${WG}`,
  source: rowReduceSource + sampleSource,
  constants: { WG },
  bindings: [
    { name: 'logits', access: 'read' },
    { name: 'samplingTable', access: 'read', type: 'u32' },
    { name: 'ids', access: 'read_write', type: 'u32' },
    { name: 'positions', access: 'read_write', type: 'i32' },
    { name: 'steps', access: 'read_write', type: 'u32' },
    { name: 'finished', access: 'read_write', type: 'u32' },
    { name: 'tokens', access: 'read_write', type: 'u32' },
    { name: 'logprobs', access: 'read_write' },
  ],
  uniforms: [
    { name: 'V', type: 'u32' },
    { name: 'rowStride', type: 'u32' },
    { name: 'rowOffset', type: 'u32' },
    { name: 'outStride', type: 'u32' },
    { name: 'numEos', type: 'u32' },
    { name: 'rowStart', type: 'u32' },
    { name: 'padId', type: 'u32' },
    { name: 'firstRow', type: 'u32' },
  ],
});

// lavapipe runs a workgroup as coroutines of one 8-lane SIMD vector each and switches all of them at every
// barrier, so its reductions are cheapest in a single vector; a GPU wants many lanes streaming a 150k vocabulary.
export const sampleVariants: readonly Variant<KernelSpec>[] = [
  { name: 'wg8', supported: (caps) => caps.deviceClass === 'cpu', value: specOfWidth(8) },
  { name: 'wg256', supported: () => true, value: specOfWidth(256) },
];

/** How the next token is chosen (HF / vLLM names and conventions). */
export interface SamplingParams {
  /** 0 = greedy (argmax); otherwise logits are divided by it. */
  temperature: number;
  /** -1 (or 0) = off. */
  topK: number;
  /** 1 = off. */
  topP: number;
  /** 32-bit seed of the counter-based generator. */
  seed: number;
}

/** One decode row's sampling: its random stream and output row (both survive compaction) and its parameters. */
export interface RowSampling extends SamplingParams {
  /**
   * The random stream (seed, stream, step, token): a sample draws the same tokens whichever row or batch decodes it.
   */
  stream: number;
  /** The row of the (outRows, outStride) tokens and log-probs it writes. */
  outRow: number;
}

/** u32 words per row of the rowSampling tensor. */
export const ROW_SAMPLING_WORDS = 6;

/** Checks one row's sampling and packs it as the kernel reads it: [stream, outRow, seed, temperature, topK, topP]. */
export function packRowSampling(s: RowSampling): number[] {
  const what = 'sampling';
  if (!(s.temperature >= 0) || !Number.isFinite(s.temperature))
    throw new Error(`${what}: temperature ${s.temperature} must be finite and ≥ 0 (0 = greedy)`);
  if (!(s.topP > 0 && s.topP <= 1)) throw new Error(`${what}: topP ${s.topP} must be in (0, 1]`);
  if (!Number.isInteger(s.topK) || s.topK < -1)
    throw new Error(`${what}: topK ${s.topK} must be -1 (off) or a non-negative integer`);
  const f32Bits = (x: number) => new Uint32Array(Float32Array.of(x).buffer)[0];
  return [s.stream >>> 0, s.outRow >>> 0, s.seed >>> 0, f32Bits(s.temperature), Math.max(0, s.topK), f32Bits(s.topP)];
}

/**
 * What the sampler reads besides the logits, one u32 tensor (so the kernel binds 8 storage buffers, WebGPU's default
 * limit): the ids that finish a row from word 0, then each row's packRowSampling from word `rowStart`, a
 * device-aligned offset, so the rows are a tensor of their own (`rowSampling`) that uploads and compaction write.
 */
export interface SamplingTable {
  table: Tensor<'u32'>;
  /** The ids that finish a row: a tokenizer's eos ids and an environment's turn-ending ids. */
  eosIds: readonly number[];
  /** The same as a tensor, the table's head (at least one element; only eosIds.length are meaningful). */
  eosTensor: Tensor<'u32'>;
  rowStart: number;
  /** (rows, ROW_SAMPLING_WORDS) the rows' sampling, a view of `table`. */
  rowSampling: Tensor<'u32'>;
}

/** A sampling table for `rows` rows with these eos ids (uploaded; the rows are left to the caller). */
export function createSamplingTable(
  engine: Engine,
  name: string,
  rows: number,
  eosIds: readonly number[],
): SamplingTable {
  const align = engine.caps.minStorageBufferOffsetAlignment / 4;
  const rowStart = Math.ceil(eosIds.length / align) * align;
  const table = engine.tensor(name, [rowStart + rows * ROW_SAMPLING_WORDS], 'u32');
  if (eosIds.length > 0) engine.upload(table.view(`${name}.eosIds`, 0, [eosIds.length]), eosIds);
  const rowSampling = table.view(`${name}.rows`, rowStart, [rows * ROW_SAMPLING_WORDS]);
  const eosTensor = table.view(`${name}.eosIds`, 0, [Math.max(1, eosIds.length)]);
  return { table, eosIds: [...eosIds], eosTensor, rowStart, rowSampling };
}

/** The windows of whole rows of `rowElements` in which the first `rows` rows of `logits` are bound: the tensor itself
 *  when they fit one binding (one dispatch, as before windows), else engine.bindingWindows's. */
export function logitsWindows(engine: Engine, logits: Tensor, rows: number, rowElements: number): RowWindow[] {
  const used =
    logits.size === rows * rowElements ? logits : logits.slice(`${logits.name}[:${rows}]`, 0, rows * rowElements);
  return engine.bindingWindows(used, rowElements);
}

export interface SampleArgs {
  /** (rows·rowStride, V); row b samples from logits row b·rowStride + rowOffset. Above one binding (or split across
   *  buffers) it is sampled window by window of whole rows, one dispatch each. */
  logits: Tensor;
  V: number;
  /** B: rows sampled, one workgroup each. */
  rows: number;
  rowStride?: number;
  rowOffset?: number;
  /** The eos ids, and the first B rows' packRowSampling. */
  sampling: SamplingTable;
  /** (B) receives the sampled token, the next step's input. */
  ids: Tensor<'u32'>;
  /** (B) incremented for rows still generating. */
  positions: Tensor<'i32'>;
  /** (B) each row's step: the output column and the random stream's step; incremented with positions. A row at
   *  step ≥ outStride has spent its budget: it emits padId and writes nothing. */
  steps: Tensor<'u32'>;
  /** (B) read: finished rows emit padId; written: 1 when the sampled token is an eos id. */
  finished: Tensor<'u32'>;
  /** (outRows, outStride) token and its log-prob written at (outRow of row b, steps[b]). */
  tokens: Tensor<'u32'>;
  logprobs: Tensor;
  outStride: number;
  padId: number;
}

/** Records one sampling step; see sample.wgsl for the exact semantics of temperature, top-k and top-p. */
export function sampleTokens(engine: Engine, a: SampleArgs): void {
  const { logits, V, rows, sampling, ids, positions, steps, finished, tokens, logprobs, outStride } = a;
  const rowStride = a.rowStride ?? 1;
  const rowOffset = a.rowOffset ?? 0;
  const launcher = 'sampleTokens';
  if (rows > engine.caps.maxComputeWorkgroupsPerDimension)
    throw new Error(`${launcher}: ${rows} rows exceed one workgroup dimension`);
  if (rowOffset >= rowStride)
    throw new Error(`${launcher}: rowOffset ${rowOffset} must be below rowStride ${rowStride}`);
  expectSize(
    launcher,
    'logits',
    logits,
    rows * rowStride * V,
    `rows·rowStride·V = ${rows}·${rowStride}·${V}`,
    'at least',
  );
  expectSize(
    launcher,
    'sampling.rowSampling',
    sampling.rowSampling,
    rows * ROW_SAMPLING_WORDS,
    `[B=${rows}, ${ROW_SAMPLING_WORDS}]`,
    'at least',
  );
  for (const [what, t] of [
    ['ids', ids],
    ['positions', positions],
    ['steps', steps],
    ['finished', finished],
  ] as const) {
    expectSize(launcher, what, t, rows, `[B=${rows}]`);
  }
  for (const [what, t] of [
    ['tokens', tokens],
    ['logprobs', logprobs],
  ] as const) {
    if (t.size % outStride !== 0 || t.size < rows * outStride) {
      throw new Error(
        `${launcher}: ${what} (tensor ${t.name}) has ${t.size} elements, expected [outRows, outStride=${outStride}]`,
      );
    }
  }
  const spec = chooseVariant('sample', sampleVariants, engine.caps, engine.knobs).value;
  // The random stream is keyed by (seed, stream, step), never by the row or its window: windows draw what one would.
  for (const window of logitsWindows(engine, logits, rows, rowStride * V)) {
    engine.dispatch(spec, {
      bindings: {
        logits: window.tensor,
        samplingTable: sampling.table,
        ids,
        positions,
        steps,
        finished,
        tokens,
        logprobs,
      },
      uniforms: {
        V,
        rowStride,
        rowOffset,
        outStride,
        numEos: sampling.eosIds.length,
        rowStart: sampling.rowStart,
        padId: a.padId,
        firstRow: window.firstRow,
      },
      workgroups: [window.rows],
    });
  }
}
