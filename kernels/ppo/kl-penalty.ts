import source from './kl-penalty.wgsl';
import {
  type Engine,
  type Tensor,
  type KernelSpec,
  foldWorkgroups,
  expectSize,
  shapeString,
} from '../../engine/index.ts';
import { expectRows, withKlEstimators, withWorkgroupReduce } from './ppo-shared.ts';
import { parseKlEstimator } from './ppo-vocabulary.ts';
import { wgslSections } from '../util/rowwise.ts';

export const klPenaltySpec: KernelSpec = {
  name: 'kl-penalty/elementwise',
  source: withKlEstimators(wgslSections('kl-penalty', source, 'elementwise')),
  bindings: [
    { name: 'logprob', access: 'read' },
    { name: 'refLogprob', access: 'read' },
    { name: 'kl', access: 'read_write' },
    { name: 'grad', access: 'read_write' },
  ],
  uniforms: [
    { name: 'n', type: 'u32' },
    { name: 'code', type: 'u32' },
    { name: 'straightThrough', type: 'u32' },
  ],
};

export const applyKlPenaltySpec: KernelSpec = {
  name: 'kl-penalty/apply',
  source: withWorkgroupReduce(withKlEstimators(wgslSections('kl-penalty', source, 'apply'))),
  bindings: [
    { name: 'scores', access: 'read' },
    { name: 'oldLogProbs', access: 'read' },
    { name: 'refLogProb', access: 'read' },
    { name: 'mask', access: 'read' },
    { name: 'rewards', access: 'read_write' },
    { name: 'rowKl', access: 'read_write' },
  ],
  uniforms: [
    { name: 'T', type: 'u32' },
    { name: 'beta', type: 'f32' },
    { name: 'code', type: 'u32' },
    { name: 'straightThrough', type: 'u32' },
  ],
};

/** kl = kl_penalty(logprob, refLogprob, klPenalty) and grad = d kl / d logprob, elementwise (no mask).
 *  Harness only, not on the training path: tools/verl/kl.ts and tests. */
export function klPenaltyGpu(
  engine: Engine,
  args: { logprob: Tensor; refLogprob: Tensor; kl: Tensor; grad: Tensor; klPenalty: string },
): void {
  const n = args.logprob.size;
  for (const [t, what] of [
    [args.refLogprob, 'refLogprob'],
    [args.kl, 'kl'],
    [args.grad, 'grad'],
  ] as const)
    expectSize('kl-penalty', what, t, n, `logprob's shape ${shapeString(args.logprob.shape)}`);
  const estimator = parseKlEstimator(args.klPenalty);
  engine.dispatch(klPenaltySpec, {
    bindings: { logprob: args.logprob, refLogprob: args.refLogprob, kl: args.kl, grad: args.grad },
    uniforms: { n, code: estimator.code, straightThrough: estimator.straightThrough ? 1 : 0 },
    workgroups: foldWorkgroups(Math.ceil(n / 256)),
  });
}

/** verl's apply_kl_penalty on the GPU: tokenLevelRewards [B, T] and rowKl [B] (current_kl = mean of rowKl).
 *  On the training path with use_kl_in_reward (ppo/algorithm/kl-in-reward.ts). */
export function applyKlPenaltyGpu(
  engine: Engine,
  args: {
    tokenLevelScores: Tensor;
    oldLogProbs: Tensor;
    refLogProb: Tensor;
    responseMask: Tensor;
    tokenLevelRewards: Tensor;
    rowKl: Tensor;
    beta: number;
    klPenalty: string;
    B: number;
    T: number;
  },
): void {
  const { B, T } = args;
  expectRows('kl-penalty/apply', B, T);
  for (const [t, what] of [
    [args.tokenLevelScores, 'tokenLevelScores'],
    [args.oldLogProbs, 'oldLogProbs'],
    [args.refLogProb, 'refLogProb'],
    [args.responseMask, 'responseMask'],
    [args.tokenLevelRewards, 'tokenLevelRewards'],
  ] as const)
    expectSize('kl-penalty/apply', what, t, B * T, `[B=${B}, T=${T}]`);
  expectSize('kl-penalty/apply', 'rowKl', args.rowKl, B, `[B=${B}]`);
  const estimator = parseKlEstimator(args.klPenalty);
  engine.dispatch(applyKlPenaltySpec, {
    bindings: {
      scores: args.tokenLevelScores,
      oldLogProbs: args.oldLogProbs,
      refLogProb: args.refLogProb,
      mask: args.responseMask,
      rewards: args.tokenLevelRewards,
      rowKl: args.rowKl,
    },
    uniforms: { T, beta: args.beta, code: estimator.code, straightThrough: estimator.straightThrough ? 1 : 0 },
    workgroups: [B],
  });
}
