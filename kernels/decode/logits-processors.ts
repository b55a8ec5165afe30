import logitsProcessorsSource from './logits-processors.wgsl';
import rowReduceSource from './row-reduce.wgsl';
import { type Engine, type Tensor, type KernelSpec, chooseVariant, expectSize } from '../../engine/index.ts';
import type { Variant } from '../../engine/variants.ts';
import { ROW_SAMPLING_WORDS, logitsWindows } from './sample.ts';

/** The most logit_bias entries one request may give (OpenAI allows 300; this server keeps them per row). */
export const MAX_LOGIT_BIAS = 64;
/** u32 words per row of rowProcessing: the header and the bias pairs. */
export const ROW_PROCESSING_WORDS = 8 + 2 * MAX_LOGIT_BIAS;

/** A request's logits processing (vLLM's and OpenAI's names); NEUTRAL_PROCESSING changes nothing. */
export interface RowProcessing {
  /** vLLM's: over the prompt's and the generated tokens, a positive logit divided by it, another multiplied; 1: off. */
  repetitionPenalty: number;
  presencePenalty: number;
  frequencyPenalty: number;
  /** token id → added to its logit */
  logitBias: ReadonlyMap<number, number>;
  /** EOS is masked while fewer tokens were generated (vLLM's min_tokens, SGLang's min_new_tokens). */
  minTokens: number;
  /** Generation goes on after an EOS (vLLM's and SGLang's ignore_eos: the EOS is drawn as any token, not masked). */
  ignoreEos: boolean;
  /** 0: off. */
  minP: number;
}

export const NEUTRAL_PROCESSING: RowProcessing = {
  repetitionPenalty: 1,
  presencePenalty: 0,
  frequencyPenalty: 0,
  logitBias: new Map(),
  minTokens: 0,
  ignoreEos: false,
  minP: 0,
};

export function isNeutralProcessing(p: RowProcessing): boolean {
  return (
    p.repetitionPenalty === 1 &&
    p.presencePenalty === 0 &&
    p.frequencyPenalty === 0 &&
    p.logitBias.size === 0 &&
    p.minTokens === 0 &&
    !p.ignoreEos &&
    p.minP === 0
  );
}

/**
 * One row's processing as the kernel reads it; `promptLength`: the row's prompt tokens in its `prompts` row, which
 * only the repetition penalty reads (0 without it).
 */
export function packRowProcessing(p: RowProcessing, promptLength = 0): number[] {
  if (p.logitBias.size > MAX_LOGIT_BIAS)
    throw new Error(`logit_bias: ${p.logitBias.size} entries, at most ${MAX_LOGIT_BIAS}`);
  const f32Bits = (x: number) => new Uint32Array(Float32Array.of(x).buffer)[0];
  const words = new Array<number>(ROW_PROCESSING_WORDS).fill(0);
  words.splice(
    0,
    8,
    p.minTokens,
    p.ignoreEos ? 1 : 0,
    p.logitBias.size,
    f32Bits(p.presencePenalty),
    f32Bits(p.frequencyPenalty),
    f32Bits(p.minP),
    p.repetitionPenalty === 1 ? 0 : promptLength,
    f32Bits(p.repetitionPenalty),
  );
  [...p.logitBias].forEach(([id, bias], k) => {
    words[8 + 2 * k] = id;
    words[9 + 2 * k] = f32Bits(bias);
  });
  return words;
}

const specOfWidth = (WG: number): KernelSpec => ({
  name: `logits-processors/wg${WG}`,
  source: rowReduceSource + logitsProcessorsSource,
  constants: { WG },
  bindings: [
    { name: 'logits', access: 'read_write' },
    { name: 'rowProcessing', access: 'read', type: 'u32' },
    { name: 'rowSampling', access: 'read', type: 'u32' },
    { name: 'tokens', access: 'read', type: 'u32' },
    { name: 'steps', access: 'read', type: 'u32' },
    { name: 'finished', access: 'read_write', type: 'u32' },
    { name: 'eosIds', access: 'read', type: 'u32' },
    { name: 'prompts', access: 'read', type: 'u32' },
  ],
  uniforms: [
    { name: 'V', type: 'u32' },
    { name: 'outStride', type: 'u32' },
    { name: 'numEos', type: 'u32' },
    { name: 'rowWords', type: 'u32' },
    { name: 'promptStride', type: 'u32' },
    { name: 'firstRow', type: 'u32' },
  ],
});

// As the sampler's: one 8-lane vector per row on lavapipe, many lanes streaming the vocabulary on a GPU.
export const logitsProcessorsVariants: readonly Variant<KernelSpec>[] = [
  { name: 'wg8', supported: (caps) => caps.deviceClass === 'cpu', value: specOfWidth(8) },
  { name: 'wg256', supported: () => true, value: specOfWidth(256) },
];

export interface LogitsProcessorsArgs {
  /** (B, V) this step's logits, processed in place before `sample` reads them; window by window above a binding. */
  logits: Tensor;
  V: number;
  rows: number;
  /** (B, ROW_PROCESSING_WORDS) each row's packRowProcessing. */
  rowProcessing: Tensor<'u32'>;
  /**
   * The sampler's per-row state: rowSampling (B, 6), steps, finished (B; an ignore_eos row finished on an EOS is
   * reopened), its (outRows, outStride) tokens.
   */
  rowSampling: Tensor<'u32'>;
  tokens: Tensor<'u32'>;
  steps: Tensor<'u32'>;
  finished: Tensor<'u32'>;
  eosIds: Tensor<'u32'>;
  numEos: number;
  outStride: number;
  /** (B, promptStride) each row's prompt ids (the repetition penalty's; a row's length is in its rowProcessing). */
  prompts: Tensor<'u32'>;
  promptStride: number;
}

/** Records one step's logits processing; see logits-processors.wgsl. */
export function processLogits(engine: Engine, a: LogitsProcessorsArgs): void {
  const launcher = 'processLogits';
  const { logits, V, rows, rowProcessing, rowSampling, tokens, steps, finished, eosIds, numEos, outStride } = a;
  const { prompts, promptStride } = a;
  expectSize(launcher, 'logits', logits, rows * V, `rows·V = ${rows}·${V}`, 'at least');
  expectSize(
    launcher,
    'rowProcessing',
    rowProcessing,
    rows * ROW_PROCESSING_WORDS,
    `[B=${rows}, ${ROW_PROCESSING_WORDS}]`,
    'at least',
  );
  expectSize(launcher, 'rowSampling', rowSampling, rows * ROW_SAMPLING_WORDS, `[B=${rows}, 6]`, 'at least');
  expectSize(launcher, 'steps', steps, rows, `[B=${rows}]`);
  expectSize(launcher, 'finished', finished, rows, `[B=${rows}]`);
  expectSize(launcher, 'eosIds', eosIds, Math.max(1, numEos), `[max(1, numEos=${numEos})]`, 'at least');
  expectSize(
    launcher,
    'prompts',
    prompts,
    rows * promptStride,
    `[B=${rows}, promptStride=${promptStride}]`,
    'at least',
  );
  if (tokens.size % outStride !== 0)
    throw new Error(
      `${launcher}: tokens (tensor ${tokens.name}) has ${tokens.size} elements, expected [outRows, ${outStride}]`,
    );
  const spec = chooseVariant('logits-processors', logitsProcessorsVariants, engine.caps, engine.knobs).value;
  for (const window of logitsWindows(engine, logits, rows, V)) {
    engine.dispatch(spec, {
      bindings: { logits: window.tensor, rowProcessing, rowSampling, tokens, steps, finished, eosIds, prompts },
      uniforms: { V, outStride, numEos, rowWords: ROW_PROCESSING_WORDS, promptStride, firstRow: window.firstRow },
      workgroups: [window.rows],
    });
  }
}
