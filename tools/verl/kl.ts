// KL between the policy and the reference: verl's kl_penalty and ray_trainer.apply_kl_penalty on plain arrays,
// running what the trainer runs on its tensors (kernels/ppo/kl-penalty.ts, ppo/algorithm/kl-in-reward.ts).
import type { Engine } from '../../engine/index.ts';
import { klPenaltyGpu } from '../../kernels/ppo/kl-penalty.ts';
import { applyKlInRewardGpu } from '../../ppo/algorithm/kl-in-reward.ts';
import type { KLController } from '../../ppo/algorithm/kl-controller.ts';
import { readMatrix, sameShape, shapeOf, upload, type Matrix } from './tensors.ts';

/** Elementwise KL estimate and its gradient d kl / d logprob. */
export async function klPenalty(
  engine: Engine,
  logprob: Matrix,
  refLogprob: Matrix,
  klPenaltyName: string,
): Promise<{ kl: number[][]; grad: number[][] }> {
  const shape = shapeOf('logprob', logprob);
  sameShape('ref_logprob', refLogprob, shape);
  const kl = engine.tensor('kl', [shape.B, shape.T]);
  const grad = engine.tensor('grad', [shape.B, shape.T]);
  klPenaltyGpu(engine, {
    logprob: upload(engine, 'logprob', logprob),
    refLogprob: upload(engine, 'ref_logprob', refLogprob),
    kl,
    grad,
    klPenalty: klPenaltyName,
  });
  return { kl: await readMatrix(engine, kl, shape.B, shape.T), grad: await readMatrix(engine, grad, shape.B, shape.T) };
}

/** token_level_rewards = scores − β·KL·mask with β read before the controller update; updates klCtrl. */
export async function applyKlPenalty(
  engine: Engine,
  args: {
    tokenLevelScores: Matrix;
    oldLogProbs: Matrix;
    refLogProb: Matrix;
    responseMask: Matrix;
    klCtrl: KLController;
    klPenalty?: string;
  },
): Promise<{ tokenLevelRewards: number[][]; metrics: Record<string, number> }> {
  const { B, T } = shapeOf('token_level_scores', args.tokenLevelScores);
  for (const [name, m] of [
    ['old_log_probs', args.oldLogProbs],
    ['ref_log_prob', args.refLogProb],
    ['response_mask', args.responseMask],
  ] as const)
    sameShape(name, m, { B, T });
  const tokenLevelRewards = engine.tensor('token_level_rewards', [B, T]);
  const metrics = await applyKlInRewardGpu(engine, {
    tokenLevelScores: upload(engine, 'token_level_scores', args.tokenLevelScores),
    oldLogProbs: upload(engine, 'old_log_probs', args.oldLogProbs),
    refLogProb: upload(engine, 'ref_log_prob', args.refLogProb),
    responseMask: upload(engine, 'response_mask', args.responseMask),
    tokenLevelRewards,
    rowKl: engine.tensor('row_kl', [B]),
    klCtrl: args.klCtrl,
    klPenalty: args.klPenalty ?? 'kl',
    B,
    T,
  });
  return { tokenLevelRewards: await readMatrix(engine, tokenLevelRewards, B, T), metrics };
}

/**
 * verl's core_algos.compute_rewards: token_level_scores − kl_ratio·(old_log_prob − ref_log_prob), unmasked (the k1
 * kernel's KL).
 */
export async function computeRewards(
  engine: Engine,
  args: { tokenLevelScores: Matrix; oldLogProb: Matrix; refLogProb: Matrix; klRatio: number },
): Promise<number[][]> {
  sameShape('old_log_prob', args.oldLogProb, shapeOf('token_level_scores', args.tokenLevelScores));
  const { kl } = await klPenalty(engine, args.oldLogProb, args.refLogProb, 'kl');
  return args.tokenLevelScores.map((row, b) => row.map((score, t) => score - kl[b][t] * args.klRatio));
}
