// PPO math with verl's names: plain-array functions for users and tests, and the *Gpu functions the trainer
// calls on its tensors.
export * from './tensors.ts';
export * from './kl.ts';
export * from '../../ppo/algorithm/kl-controller.ts';
export * from './masked-stats.ts';
export * from './advantages.ts';
export * from './losses.ts';
export { Rng, type RngState } from '../../engine/rng.ts';
export * from '../../ppo/algorithm/reward-mask.ts';
export * from '../../ppo/algorithm/critic-plan.ts';
export * as gsm8k from '../../ppo/rewards/gsm8k.ts';
