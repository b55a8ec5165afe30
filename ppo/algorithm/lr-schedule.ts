// The learning rate of each training step from an optim config section (verl's fsdp workers:
// get_constant_schedule_with_warmup / get_cosine_schedule_with_warmup, stepped once per training step, so
// step 0 uses the schedule's first value). Warmup is lr_warmup_steps, or lr_warmup_steps_ratio × total steps
// when that is negative.
import type { PpoConfig } from '../config.ts';

export type OptimConfig = PpoConfig['actor_rollout_ref']['actor']['optim'];
/** The keys a schedule reads (the SFT job builds one from verl's SFT optim keys). */
export type LrSchedule = Pick<
  OptimConfig,
  'lr' | 'lr_warmup_steps' | 'lr_warmup_steps_ratio' | 'lr_scheduler_type' | 'min_lr_ratio' | 'num_cycles'
>;

export function warmupSteps(optim: LrSchedule, totalSteps: number): number {
  return optim.lr_warmup_steps >= 0 ? optim.lr_warmup_steps : Math.trunc(optim.lr_warmup_steps_ratio * totalSteps);
}

/** The multiplier of optim.lr at 0-based training step `step`. */
export function learningRateFactor(optim: LrSchedule, step: number, totalSteps: number): number {
  const warmup = warmupSteps(optim, totalSteps);
  if (optim.lr_scheduler_type === 'constant') return step < warmup ? step / Math.max(1, warmup) : 1;
  const minRatio = optim.min_lr_ratio;
  if (step < warmup) return minRatio + (1 - minRatio) * (step / Math.max(1, warmup));
  const progress = (step - warmup) / Math.max(1, totalSteps - warmup);
  const x = Math.cos(Math.PI * optim.num_cycles * 2 * progress);
  return Math.max(minRatio, x * (1 - minRatio) * 0.5 + (1 + minRatio) * 0.5);
}

export function learningRate(optim: LrSchedule, step: number, totalSteps: number): number {
  return optim.lr * learningRateFactor(optim, step, totalSteps);
}
