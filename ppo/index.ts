// PPO math with verl's names: plain-array functions for users and tests, and the *Gpu functions the trainer
// calls on its tensors.
export * from './tensors.ts';
export * from './kl.ts';
export * from './kl-controller.ts';
export * from './masked-stats.ts';
export * from './advantages.ts';
export * from './losses.ts';
export { Rng, type RngState } from '../engine/rng.ts';
export * from './reward-mask.ts';
export * from './critic.ts';
export * as gsm8k from './rewards/gsm8k.ts';
