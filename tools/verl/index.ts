// PPO math with verl's names as plain-array functions, for tools/verl-case.ts and tests. Each runs the kernels
// and checks the trainer runs (ppo/algorithm/), so a verl case passing here vouches for the trainer's math.
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
export * from './signatures.ts';
