import sampleSource from './sample.wgsl';
import { type Engine, type Tensor, type KernelSpec, chooseVariant, expectSize } from '../../engine/index.ts';
import type { Variant } from '../../engine/variants.ts';

const specOfWidth = (WG: number): KernelSpec => ({
  name: `sample/wg${WG}`,
  source: sampleSource,
  constants: { WG },
  bindings: [
    { name: 'logits', access: 'read' },
    { name: 'eosIds', access: 'read', type: 'u32' },
    { name: 'sampleIds', access: 'read', type: 'u32' },
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
    { name: 'seed', type: 'u32' },
    { name: 'temperature', type: 'f32' },
    { name: 'topK', type: 'u32' },
    { name: 'topP', type: 'f32' },
    { name: 'numEos', type: 'u32' },
    { name: 'padId', type: 'u32' },
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

export interface SampleArgs extends SamplingParams {
  /** (rows·rowStride, V); row b samples from logits row b·rowStride + rowOffset. */
  logits: Tensor;
  V: number;
  /** B: rows sampled, one workgroup each. */
  rows: number;
  rowStride?: number;
  rowOffset?: number;
  /** (numEos ≥ 1 elements; only the first numEos are read) */
  eosIds: Tensor<'u32'>;
  numEos: number;
  /** (B) the sample each row holds, < samples: its output row, and its random stream (seed, sample, step, token),
   *  so a sample draws the same tokens whichever row or batch decodes it. */
  sampleIds: Tensor<'u32'>;
  /** (B) receives the sampled token, the next step's input. */
  ids: Tensor<'u32'>;
  /** (B) incremented for rows still generating. */
  positions: Tensor<'i32'>;
  /** (B) each row's step: the output column and the random stream's step; incremented with positions. A row at
   *  step ≥ outStride has spent its budget: it emits padId and writes nothing. */
  steps: Tensor<'u32'>;
  /** (B) read: finished rows emit padId; written: 1 when the sampled token is an eos id. */
  finished: Tensor<'u32'>;
  /** (samples, outStride) token and its log-prob written at (sampleIds[b], steps[b]). */
  tokens: Tensor<'u32'>;
  logprobs: Tensor;
  outStride: number;
  padId: number;
}

/** Records one sampling step; see sample.wgsl for the exact semantics of temperature, top-k and top-p. */
export function sampleTokens(engine: Engine, a: SampleArgs): void {
  const { logits, V, rows, eosIds, numEos, sampleIds, ids, positions, steps, finished, tokens, logprobs, outStride } = a;
  const rowStride = a.rowStride ?? 1;
  const rowOffset = a.rowOffset ?? 0;
  const launcher = 'sampleTokens';
  if (rows > engine.caps.maxComputeWorkgroupsPerDimension) throw new Error(`${launcher}: ${rows} rows exceed one workgroup dimension`);
  if (rowOffset >= rowStride) throw new Error(`${launcher}: rowOffset ${rowOffset} must be below rowStride ${rowStride}`);
  expectSize(launcher, 'logits', logits, rows * rowStride * V, `rows·rowStride·V = ${rows}·${rowStride}·${V}`, 'at least');
  expectSize(launcher, 'eosIds', eosIds, Math.max(1, numEos), `[max(1, numEos=${numEos})]`, 'at least');
  if (!(a.temperature >= 0)) throw new Error(`${launcher}: temperature ${a.temperature} must be ≥ 0 (0 = greedy)`);
  if (!(a.topP > 0 && a.topP <= 1)) throw new Error(`${launcher}: topP ${a.topP} must be in (0, 1]`);
  if (!Number.isInteger(a.topK) || a.topK < -1) throw new Error(`${launcher}: topK ${a.topK} must be -1 (off) or a non-negative integer`);
  for (const [what, t] of [['sampleIds', sampleIds], ['ids', ids], ['positions', positions], ['steps', steps], ['finished', finished]] as const) {
    expectSize(launcher, what, t, rows, `[B=${rows}]`);
  }
  for (const [what, t] of [['tokens', tokens], ['logprobs', logprobs]] as const) {
    if (t.size % outStride !== 0 || t.size < rows * outStride) {
      throw new Error(`${launcher}: ${what} (tensor ${t.name}) has ${t.size} elements, expected [samples ≥ B=${rows}, outStride=${outStride}]`);
    }
  }
  engine.dispatch(chooseVariant('sample', sampleVariants, engine.caps, engine.knobs).value, {
    bindings: { logits, eosIds, sampleIds, ids, positions, steps, finished, tokens, logprobs },
    uniforms: {
      V, rowStride, rowOffset, outStride, seed: a.seed >>> 0, temperature: a.temperature,
      topK: Math.max(0, a.topK), topP: a.topP, numEos, padId: a.padId,
    },
    workgroups: [rows],
  });
}
