// Harness only, not on the training path: tools/verl/losses.ts and tests dispatch logprob-entropy (the trainer's
// LM head, lm-head, fuses log-prob, entropy and their backward chunk by chunk).
import source from './logprob-entropy.wgsl';
import {
  type Engine,
  type Tensor,
  type KernelSpec,
  type BindingSpec,
  type UniformSpec,
  foldWorkgroups,
  expectSize,
} from '../../engine/index.ts';
import { withWorkgroupReduce } from './ppo-shared.ts';
import { wgslSections } from '../util/rowwise.ts';

const inputs: BindingSpec[] = [
  { name: 'logits', access: 'read' },
  { name: 'labels', access: 'read', type: 'u32' },
];
const uniforms: UniformSpec[] = [
  { name: 'N', type: 'u32' },
  { name: 'V', type: 'u32' },
];

export const logprobEntropyForwardSpec: KernelSpec = {
  name: 'logprob-entropy/forward',
  source: withWorkgroupReduce(wgslSections('logprob-entropy', source, 'forward')),
  entryPoint: 'forward',
  bindings: [...inputs, { name: 'logProb', access: 'read_write' }, { name: 'entropy', access: 'read_write' }],
  uniforms,
};

export const logprobEntropyBackwardSpec: KernelSpec = {
  name: 'logprob-entropy/backward',
  source: withWorkgroupReduce(wgslSections('logprob-entropy', source, 'backward')),
  entryPoint: 'backward',
  bindings: [
    ...inputs,
    { name: 'coefficients', access: 'read', type: 'vec2<f32>' },
    { name: 'gradLogits', access: 'read_write' },
  ],
  uniforms,
};

function check(op: string, logits: Tensor, labels: Tensor, N: number, V: number): void {
  expectSize(op, 'logits', logits, N * V, `[N=${N}, V=${V}]`);
  expectSize(op, 'labels', labels, N, `[N=${N}]`);
}

/** logProb [N] = log softmax(logits)[label], entropy [N] = logsumexp − Σ p·z. */
export function logprobEntropyGpu(
  engine: Engine,
  args: { logits: Tensor; labels: Tensor; logProb: Tensor; entropy: Tensor; N: number; V: number },
): void {
  const { N, V } = args;
  check('logprob-entropy', args.logits, args.labels, N, V);
  expectSize('logprob-entropy', 'logProb', args.logProb, N, `[N=${N}]`);
  expectSize('logprob-entropy', 'entropy', args.entropy, N, `[N=${N}]`);
  engine.dispatch(logprobEntropyForwardSpec, {
    bindings: { logits: args.logits, labels: args.labels, logProb: args.logProb, entropy: args.entropy },
    uniforms: { N, V },
    workgroups: foldWorkgroups(N),
  });
}

/** gradLogits [N, V] from coefficients [N, 2] = (d loss/d logProb, d loss/d entropy) — policy-loss's `grads`. */
export function logprobEntropyBackwardGpu(
  engine: Engine,
  args: { logits: Tensor; labels: Tensor; coefficients: Tensor; gradLogits: Tensor; N: number; V: number },
): void {
  const { N, V } = args;
  check('logprob-entropy', args.logits, args.labels, N, V);
  expectSize('logprob-entropy', 'coefficients', args.coefficients, 2 * N, `[N=${N}, 2]`);
  expectSize('logprob-entropy', 'gradLogits', args.gradLogits, N * V, `[N=${N}, V=${V}]`);
  engine.dispatch(logprobEntropyBackwardSpec, {
    bindings: {
      logits: args.logits,
      labels: args.labels,
      coefficients: args.coefficients,
      gradLogits: args.gradLogits,
    },
    uniforms: { N, V },
    workgroups: foldWorkgroups(N),
  });
}
