// algorithm.use_kl_in_reward (verl's ray_trainer.apply_kl_penalty): token_level_rewards = scores − β·KL·mask,
// with β read before the controller sees this batch's current_kl (the mean over rows of each row's masked KL).
// The trainer and tools/verl/ both come through here.
import type { Engine, Tensor } from '../../engine/index.ts';
import { applyKlPenaltyGpu } from '../../kernels/ppo/kl-penalty.ts';
import type { KLController } from './kl-controller.ts';

export async function applyKlInRewardGpu(
  engine: Engine,
  args: {
    /** (B, T) tensors; tokenLevelRewards is written, rowKl (B) is scratch. */
    tokenLevelScores: Tensor;
    oldLogProbs: Tensor;
    refLogProb: Tensor;
    responseMask: Tensor;
    tokenLevelRewards: Tensor;
    rowKl: Tensor;
    klCtrl: KLController;
    klPenalty: string;
    B: number;
    T: number;
  },
): Promise<{ 'actor/reward_kl_penalty': number; 'actor/reward_kl_penalty_coeff': number }> {
  const beta = args.klCtrl.value;
  applyKlPenaltyGpu(engine, { ...args, beta });
  const rowKl = await engine.read(args.rowKl);
  let sum = 0;
  for (let b = 0; b < rowKl.length; b++) sum += rowKl[b];
  const currentKl = sum / args.B;
  args.klCtrl.update(currentKl, args.B);
  return { 'actor/reward_kl_penalty': currentKl, 'actor/reward_kl_penalty_coeff': beta };
}
