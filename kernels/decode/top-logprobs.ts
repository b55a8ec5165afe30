import topLogprobsSource from './top-logprobs.wgsl';
import rowReduceSource from './row-reduce.wgsl';
import rowTopKSource from './row-top-k.wgsl';
import { type Engine, type Tensor, type KernelSpec, chooseVariant, expectSize } from '../../engine/index.ts';
import type { Variant } from '../../engine/variants.ts';
import { ROW_SAMPLING_WORDS, logitsWindows } from './sample.ts';

/** The most alternatives a request may ask for (vLLM's default max_logprobs). */
export const MAX_TOP_LOGPROBS = 20;

const specOfWidth = (WG: number): KernelSpec => ({
  name: `top-logprobs/wg${WG}`,
  source: rowReduceSource + rowTopKSource + topLogprobsSource,
  constants: { WG },
  bindings: [
    { name: 'logits', access: 'read' },
    { name: 'rowSampling', access: 'read', type: 'u32' },
    { name: 'steps', access: 'read', type: 'u32' },
    { name: 'finished', access: 'read', type: 'u32' },
    { name: 'topIds', access: 'read_write', type: 'u32' },
    { name: 'topLogprobs', access: 'read_write' },
  ],
  uniforms: [
    { name: 'V', type: 'u32' },
    { name: 'outStride', type: 'u32' },
    { name: 'K', type: 'u32' },
    { name: 'firstRow', type: 'u32' },
  ],
});

// As the sampler's: one 8-lane vector per row on lavapipe, many lanes streaming the vocabulary on a GPU.
export const topLogprobsVariants: readonly Variant<KernelSpec>[] = [
  { name: 'wg8', supported: (caps) => caps.deviceClass === 'cpu', value: specOfWidth(8) },
  { name: 'wg256', supported: () => true, value: specOfWidth(256) },
];

export interface TopLogprobsArgs {
  /** (B, V) this step's logits, the ones `sample` reads next; window by window above a binding. */
  logits: Tensor;
  V: number;
  /** B: rows, one workgroup each. */
  rows: number;
  /** (B, ROW_SAMPLING_WORDS) the sampler's per-row sampling (outRow, temperature). */
  rowSampling: Tensor<'u32'>;
  /** (B) the sampler's steps and finished flags, before it runs. */
  steps: Tensor<'u32'>;
  finished: Tensor<'u32'>;
  /** (outRows, outStride, K) */
  topIds: Tensor<'u32'>;
  topLogprobs: Tensor;
  outStride: number;
  K: number;
}

/** Records one step's top-K log-probs; see top-logprobs.wgsl. */
export function topLogprobs(engine: Engine, a: TopLogprobsArgs): void {
  const { logits, V, rows, rowSampling, steps, finished, topIds, topLogprobs, outStride, K } = a;
  const launcher = 'topLogprobs';
  if (!(K >= 1 && K <= V)) throw new Error(`${launcher}: K ${K} must be in [1, V=${V}]`);
  expectSize(launcher, 'logits', logits, rows * V, `rows·V = ${rows}·${V}`, 'at least');
  expectSize(launcher, 'rowSampling', rowSampling, rows * ROW_SAMPLING_WORDS, `[B=${rows}, 6]`, 'at least');
  expectSize(launcher, 'steps', steps, rows, `[B=${rows}]`);
  expectSize(launcher, 'finished', finished, rows, `[B=${rows}]`);
  for (const [what, t] of [
    ['topIds', topIds],
    ['topLogprobs', topLogprobs],
  ] as const) {
    if (t.size % (outStride * K) !== 0)
      throw new Error(
        `${launcher}: ${what} (tensor ${t.name}) has ${t.size} elements, expected [outRows, ${outStride}, ${K}]`,
      );
  }
  const spec = chooseVariant('top-logprobs', topLogprobsVariants, engine.caps, engine.knobs).value;
  for (const window of logitsWindows(engine, logits, rows, V)) {
    engine.dispatch(spec, {
      bindings: { logits: window.tensor, rowSampling, steps, finished, topIds, topLogprobs },
      uniforms: { V, outStride, K, firstRow: window.firstRow },
      workgroups: [window.rows],
    });
  }
}
