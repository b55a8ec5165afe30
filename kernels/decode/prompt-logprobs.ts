import promptLogprobsSource from './prompt-logprobs.wgsl';
import rowReduceSource from './row-reduce.wgsl';
import rowTopKSource from './row-top-k.wgsl';
import { type Engine, type Tensor, type KernelSpec, chooseVariant, expectSize } from '../../engine/index.ts';
import type { Variant } from '../../engine/variants.ts';

const specOfWidth = (WG: number): KernelSpec => ({
  name: `prompt-logprobs/wg${WG}`,
  source: rowReduceSource + rowTopKSource + promptLogprobsSource,
  constants: { WG },
  bindings: [
    { name: 'logits', access: 'read' },
    { name: 'targets', access: 'read', type: 'u32' },
    { name: 'tokenLogprobs', access: 'read_write' },
    { name: 'ranks', access: 'read_write', type: 'u32' },
    { name: 'topIds', access: 'read_write', type: 'u32' },
    { name: 'topLogprobs', access: 'read_write' },
    { name: 'gatherIds', access: 'read', type: 'u32' },
    { name: 'gathered', access: 'read_write' },
  ],
  uniforms: [
    { name: 'V', type: 'u32' },
    { name: 'rowOffset', type: 'u32' },
    { name: 'K', type: 'u32' },
    { name: 'M', type: 'u32' },
    { name: 'invTemperature', type: 'f32' },
  ],
});

// As top-logprobs': one 8-lane vector per position on lavapipe, many lanes streaming the vocabulary on a GPU.
export const promptLogprobsVariants: readonly Variant<KernelSpec>[] = [
  { name: 'wg8', supported: (caps) => caps.deviceClass === 'cpu', value: specOfWidth(8) },
  { name: 'wg256', supported: () => true, value: specOfWidth(256) },
];

export interface PromptLogprobsArgs {
  /** (rows, V) the logits of prompt positions rowOffset … rowOffset + rows − 1. */
  logits: Tensor;
  V: number;
  rows: number;
  rowOffset: number;
  /** (N) the token that follows each position. */
  targets: Tensor<'u32'>;
  /** (N) each position's target log-prob and rank. */
  tokenLogprobs: Tensor;
  ranks: Tensor<'u32'>;
  /** (N, K) alternatives per position (K = 0: none; the tensors still need one element). */
  topIds: Tensor<'u32'>;
  topLogprobs: Tensor;
  K: number;
  /** (M) tokens whose log-probs are gathered at every position, and (rows, M) where this chunk's go (M = 0: none;
   *  the tensors still need one element). */
  gatherIds: Tensor<'u32'>;
  gathered: Tensor;
  M: number;
  /** log_softmax(logits · invTemperature); 1: the model's own distribution. */
  invTemperature: number;
}

/** Records one chunk's prompt log-probs; see prompt-logprobs.wgsl. */
export function promptLogprobs(engine: Engine, a: PromptLogprobsArgs): void {
  const { logits, V, rows, rowOffset, targets, tokenLogprobs, ranks, topIds, topLogprobs, K } = a;
  const { gatherIds, gathered, M, invTemperature } = a;
  const launcher = 'promptLogprobs';
  if (!(K >= 0 && K <= V)) throw new Error(`${launcher}: K ${K} must be in [0, V=${V}]`);
  const N = rowOffset + rows;
  expectSize(launcher, 'logits', logits, rows * V, `rows·V = ${rows}·${V}`, 'at least');
  expectSize(launcher, 'targets', targets, N, `[rowOffset + rows = ${N}]`, 'at least');
  expectSize(launcher, 'tokenLogprobs', tokenLogprobs, N, `[rowOffset + rows = ${N}]`, 'at least');
  expectSize(launcher, 'ranks', ranks, N, `[rowOffset + rows = ${N}]`, 'at least');
  expectSize(launcher, 'topIds', topIds, Math.max(1, N * K), `[${N}, K=${K}]`, 'at least');
  expectSize(launcher, 'topLogprobs', topLogprobs, Math.max(1, N * K), `[${N}, K=${K}]`, 'at least');
  expectSize(launcher, 'gatherIds', gatherIds, Math.max(1, M), `[M=${M}]`, 'at least');
  expectSize(launcher, 'gathered', gathered, Math.max(1, rows * M), `[rows=${rows}, M=${M}]`, 'at least');
  if (!(invTemperature > 0)) throw new Error(`${launcher}: invTemperature ${invTemperature} must be > 0`);
  engine.dispatch(chooseVariant('prompt-logprobs', promptLogprobsVariants, engine.caps, engine.knobs).value, {
    bindings: { logits, targets, tokenLogprobs, ranks, topIds, topLogprobs, gatherIds, gathered },
    uniforms: { V, rowOffset, K, M, invTemperature },
    workgroups: [rows],
  });
}
