// KL between the policy and the reference: verl's kl_penalty and ray_trainer.apply_kl_penalty on plain arrays,
// running the same kernels the trainer calls on its tensors (kernels/kl-penalty.ts: klPenaltyGpu, applyKlPenaltyGpu).
import type { Engine } from '../../engine/index.ts';
import { applyKlPenaltyGpu, klPenaltyGpu } from '../../kernels/kl-penalty.ts';
import type { KLController } from '../../ppo/algorithm/kl-controller.ts';
import { readMatrix, sameShape, shapeOf, upload, type Matrix } from './tensors.ts';

export { klPenaltyGpu, applyKlPenaltyGpu };

/** Elementwise KL estimate and its gradient d kl / d logprob. */
export async function klPenalty(engine: Engine, logprob: Matrix, refLogprob: Matrix, klPenaltyName: string): Promise<{ kl: number[][]; grad: number[][] }> {
  const shape = shapeOf('logprob', logprob);
  sameShape('ref_logprob', refLogprob, shape);
  const kl = engine.tensor('kl', [shape.B, shape.T]);
  const grad = engine.tensor('grad', [shape.B, shape.T]);
  klPenaltyGpu(engine, { logprob: upload(engine, 'logprob', logprob), refLogprob: upload(engine, 'ref_logprob', refLogprob), kl, grad, klPenalty: klPenaltyName });
  return { kl: await readMatrix(engine, kl, shape.B, shape.T), grad: await readMatrix(engine, grad, shape.B, shape.T) };
}

/** Mean over rows of each row's masked KL mean (verl's current_kl), from the kernel's rowKl. */
export function currentKl(rowKl: ArrayLike<number>): number {
  let sum = 0;
  for (let b = 0; b < rowKl.length; b++) sum += rowKl[b];
  return sum / rowKl.length;
}

/** token_level_rewards = scores − β·KL·mask with β read before the controller update; updates klCtrl. */
export async function applyKlPenalty(engine: Engine, args: {
  tokenLevelScores: Matrix; oldLogProbs: Matrix; refLogProb: Matrix; responseMask: Matrix; klCtrl: KLController; klPenalty?: string;
}): Promise<{ tokenLevelRewards: number[][]; metrics: Record<string, number> }> {
  const { B, T } = shapeOf('token_level_scores', args.tokenLevelScores);
  for (const [name, m] of [['old_log_probs', args.oldLogProbs], ['ref_log_prob', args.refLogProb], ['response_mask', args.responseMask]] as const) sameShape(name, m, { B, T });
  const beta = args.klCtrl.value;
  const tokenLevelRewards = engine.tensor('token_level_rewards', [B, T]);
  const rowKl = engine.tensor('row_kl', [B]);
  applyKlPenaltyGpu(engine, {
    tokenLevelScores: upload(engine, 'token_level_scores', args.tokenLevelScores), oldLogProbs: upload(engine, 'old_log_probs', args.oldLogProbs),
    refLogProb: upload(engine, 'ref_log_prob', args.refLogProb), responseMask: upload(engine, 'response_mask', args.responseMask),
    tokenLevelRewards, rowKl, beta, klPenalty: args.klPenalty ?? 'kl', B, T,
  });
  const kl = currentKl(await engine.read(rowKl));
  args.klCtrl.update(kl, B);
  return {
    tokenLevelRewards: await readMatrix(engine, tokenLevelRewards, B, T),
    metrics: { 'actor/reward_kl_penalty': kl, 'actor/reward_kl_penalty_coeff': beta },
  };
}
