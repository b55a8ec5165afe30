// The actor's policy-loss keys resolved once (verl's defaults: clip_ratio_low/high default to clip_ratio) and
// checked the way verl's compute_policy_loss checks them.
import type { PolicyLossConfig } from '../../kernels/ppo/ppo-vocabulary.ts';

/** actor config keys of the policy loss (clip_ratio_low/high default to clip_ratio, as in verl). */
export interface PolicyLossOptions {
  lossMode?: 'vanilla' | 'gspo';
  clipRatio?: number;
  clipRatioLow?: number;
  clipRatioHigh?: number;
  clipRatioC?: number;
}

export function resolvePolicyLossConfig(options: PolicyLossOptions): PolicyLossConfig {
  const clipRatio = options.clipRatio ?? 0.2;
  const config: PolicyLossConfig = {
    lossMode: options.lossMode ?? 'vanilla',
    clipRatioLow: options.clipRatioLow ?? clipRatio,
    clipRatioHigh: options.clipRatioHigh ?? clipRatio,
    clipRatioC: options.clipRatioC ?? 3.0,
  };
  if (config.lossMode !== 'vanilla' && config.lossMode !== 'gspo') throw new Error(`actor.policy_loss.loss_mode: unsupported "${config.lossMode}" (expected vanilla or gspo)`);
  if (config.lossMode === 'vanilla' && !(config.clipRatioC > 1)) {
    throw new Error(`actor.clip_ratio_c: the lower bound of the ratio for dual-clip PPO must be greater than 1.0, got ${config.clipRatioC}`);
  }
  return config;
}
