// The PPO step's settings, resolved from the verl config once when the trainer is built, so the step reads
// each phase's options instead of translating config keys every iteration. Only the learning rate changes
// from step to step (ppo/algorithm/lr-schedule.ts).
import { advEstimatorSpec } from './config/advantage-estimator-table.ts';
import { BYPASS_LOSS_MODES, type BypassCorrectionPlan } from './algorithm/bypass-correction.ts';
import { parseRolloutIsThreshold, parseRolloutRs } from './config/rollout-rs-spec.ts';
import type { PpoConfig } from './config.ts';
import { batchSizes, computeDtype, rolloutDtype, usesPfPpo, usesRolloutServers } from './config.ts';
import type { ExperiencePlan } from './phases/experience.ts';
import type { ActorUpdateConfig } from './phases/actor-update.ts';
import type { CriticUpdateConfig } from './phases/critic-update.ts';
import { resolvePolicyLossConfig } from './algorithm/policy-loss-config.ts';
import type { OptimConfig } from './algorithm/lr-schedule.ts';
import type { PfPpoPlan } from './algorithm/pf-ppo.ts';
import { planDistillation, type DistillationPlan } from './algorithm/distillation.ts';

export interface StepPlan {
  /** algorithm.rollout_correction's importance weights on the policy loss against recomputed old log-probs, once
   *  per step; null: none, or bypass mode (the actor's update then applies them: actor.bypass). */
  rolloutIs: BypassCorrectionPlan['rolloutIs'];
  /** algorithm.rollout_correction's rejection sampling, likewise; null: none or bypass mode. */
  rolloutRs: BypassCorrectionPlan['rolloutRs'];
  /** ReMax: a greedy rollout of the same prompts gives each sample its baseline score. */
  remaxBaseline: boolean;
  /** algorithm.reward_mask_ratio */
  rewardMaskRatio: number;
  /** algorithm.use_pf_ppo's resampling after the advantages; null: off, or an estimator other than GAE (verl's too). */
  pfPpo: PfPpoPlan | null;
  experience: ExperiencePlan;
  critic: Omit<CriticUpdateConfig, 'lr'>;
  criticOptim: OptimConfig;
  actor: Omit<ActorUpdateConfig, 'lr'>;
  actorOptim: OptimConfig;
  /** trainer.critic_warmup: steps that update the critic only. */
  criticWarmup: number;
  /** distillation.enabled: the teachers, their routing and the loss; null: off. */
  distillation: DistillationPlan | null;
}

export function planStep(c: PpoConfig): StepPlan {
  const sizes = batchSizes(c);
  const a = c.actor_rollout_ref.actor;
  const temperature = c.actor_rollout_ref.rollout.temperature;
  const ref = c.actor_rollout_ref.ref;
  const rollout = c.actor_rollout_ref.rollout;
  const rc = c.algorithm.rollout_correction;
  const bypass: BypassCorrectionPlan | null = rc.bypass_mode
    ? { lossType: rc.loss_type, rolloutIs: rolloutIsPlan(c), rolloutRs: rolloutRsPlan(c) }
    : null;
  const distillation = planDistillation(c);
  return {
    rolloutIs: bypass ? null : decoupledIs(c),
    rolloutRs: bypass ? null : decoupledRs(c),
    remaxBaseline: advEstimatorSpec(c.algorithm.adv_estimator)?.rewardBaselines === true,
    rewardMaskRatio: c.algorithm.reward_mask_ratio,
    pfPpo: usesPfPpo(c)
      ? { reweightMethod: c.algorithm.pf_ppo.reweight_method, weightPow: c.algorithm.pf_ppo.weight_pow }
      : null,
    experience: {
      advEstimator: c.algorithm.adv_estimator,
      gamma: c.algorithm.gamma,
      lam: c.algorithm.lam,
      normAdvByStdInGrpo: c.algorithm.norm_adv_by_std_in_grpo,
      gdpo:
        c.algorithm.gdpo_reward_keys === null
          ? null
          : { keys: c.algorithm.gdpo_reward_keys, weights: c.algorithm.gdpo_reward_weights },
      useKlInReward: c.algorithm.use_kl_in_reward,
      klPenalty: c.algorithm.kl_penalty,
      temperature,
      calculateLogProbs: rolloutLogProbsKept(c) && !bypass,
      // verl's bypass mode skips the old-log-prob forward, and with it Σπ² (checks.ts refuses the optimal token
      // baselines there).
      calculateSumPiSquared: a.calculate_sum_pi_squared && !bypass,
      oldForward: {
        microBatchSize: rollout.log_prob_micro_batch_size_per_gpu,
        maxTokens: rollout.log_prob_use_dynamic_bsz ? rollout.log_prob_max_token_len_per_gpu : null,
        maxTokensKey: 'actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu',
      },
      refForward: {
        microBatchSize: ref.log_prob_micro_batch_size_per_gpu,
        maxTokens: ref.log_prob_use_dynamic_bsz ? ref.log_prob_max_token_len_per_gpu : null,
        maxTokensKey: 'actor_rollout_ref.ref.log_prob_max_token_len_per_gpu',
      },
      valueForward: {
        microBatchSize: c.critic.forward_micro_batch_size_per_gpu,
        maxTokens: c.critic.use_dynamic_bsz ? c.critic.forward_max_token_len_per_gpu : null,
        maxTokensKey: 'critic.forward_max_token_len_per_gpu',
      },
    },
    critic: {
      epochs: c.critic.ppo_epochs,
      miniBatchSize: sizes.criticMiniBatch,
      microBatchSize: sizes.criticMicroBatch,
      maxTokens: c.critic.use_dynamic_bsz ? c.critic.ppo_max_token_len_per_gpu : null,
      maxTokensKey: 'critic.ppo_max_token_len_per_gpu',
      shuffle: c.critic.shuffle,
      lossAggMode: c.critic.loss_agg_mode,
      lossScaleFactor: c.critic.loss_scale_factor,
      cliprangeValue: c.critic.cliprange_value,
    },
    criticOptim: c.critic.optim,
    actor: {
      epochs: a.ppo_epochs,
      miniBatchSize: sizes.actorMiniBatch,
      microBatchSize: sizes.actorMicroBatch,
      shuffle: a.shuffle,
      maxTokens: a.use_dynamic_bsz ? a.ppo_max_token_len_per_gpu : null,
      maxTokensKey: 'actor_rollout_ref.actor.ppo_max_token_len_per_gpu',
      lossAggMode: a.loss_agg_mode,
      lossScaleFactor: a.loss_scale_factor,
      policyLoss: resolvePolicyLossConfig({
        lossMode: bypass ? BYPASS_LOSS_MODES[bypass.lossType] : a.policy_loss.loss_mode,
        clipRatio: a.clip_ratio,
        clipRatioLow: a.clip_ratio_low ?? undefined,
        clipRatioHigh: a.clip_ratio_high ?? undefined,
        clipRatioC: a.clip_ratio_c,
        tauPos: a.tau_pos,
        tauNeg: a.tau_neg,
        clipCovRatio: a.policy_loss.clip_cov_ratio,
        clipCovLb: a.policy_loss.clip_cov_lb,
        clipCovUb: a.policy_loss.clip_cov_ub,
        klCovRatio: a.policy_loss.kl_cov_ratio,
        ppoKlCoef: a.policy_loss.ppo_kl_coef,
        droBeta: a.policy_loss.dro_beta,
      }),
      entropyCoeff: a.entropy_coeff,
      useKlLoss: a.use_kl_loss,
      klLossCoef: a.kl_loss_coef,
      klLossType: a.kl_loss_type,
      temperature,
      bypass,
      distillation: distillation?.loss ?? null,
    },
    actorOptim: a.optim,
    criticWarmup: c.trainer.critic_warmup,
    distillation,
  };
}

/** The rollout's own log-probs stay beside recomputed old ones: asked for (calculate_log_probs), or always with
 *  rollout servers, whose kernels, dtype and (mode=async) weights differ from the trainer's — verl's default of
 *  recomputing old log-probs in the trainer — and with an in-process rollout in half precision
 *  (rollout.dtype=bfloat16|float16), whose weights and KV cache are rounded copies of the actor's, or beside a
 *  training forward in half precision (fsdp_config.dtype), whose log-probs are not the float32 sampler's. */
function rolloutLogProbsKept(c: PpoConfig): boolean {
  return (
    c.actor_rollout_ref.rollout.calculate_log_probs ||
    usesRolloutServers(c) ||
    rolloutDtype(c) !== 'f32' ||
    computeDtype(c, 'actor') !== 'f32'
  );
}

/** algorithm.rollout_correction's settings, for either mode. */
function rolloutIsPlan(c: PpoConfig): StepPlan['rolloutIs'] {
  const rc = c.algorithm.rollout_correction;
  if (rc.rollout_is === null) return null;
  // A bad threshold is refused at composition; the weights parse it again each step.
  parseRolloutIsThreshold(rc.rollout_is_threshold);
  return { level: rc.rollout_is, threshold: rc.rollout_is_threshold, batchNormalize: rc.rollout_is_batch_normalize };
}

function rolloutRsPlan(c: PpoConfig): StepPlan['rolloutRs'] {
  const rc = c.algorithm.rollout_correction;
  return rc.rollout_rs === null ? null : parseRolloutRs(rc.rollout_rs, rc.rollout_rs_threshold);
}

/** Decoupled mode compares recomputed old log-probs with the rollout's, so both must be kept (bypass mode compares
 *  the current policy's with the rollout's, which the experience always has). */
function decoupledIs(c: PpoConfig): StepPlan['rolloutIs'] {
  const is = rolloutIsPlan(c);
  if (is !== null && !rolloutLogProbsKept(c)) {
    throw new Error(
      `algorithm.rollout_correction.rollout_is=${c.algorithm.rollout_correction.rollout_is} needs the rollout's own ` +
        `log-probs beside recomputed old ones: set actor_rollout_ref.rollout.calculate_log_probs=true`,
    );
  }
  return is;
}

function decoupledRs(c: PpoConfig): StepPlan['rolloutRs'] {
  const rs = rolloutRsPlan(c);
  if (rs !== null && !rolloutLogProbsKept(c)) {
    throw new Error(
      `algorithm.rollout_correction.rollout_rs=${c.algorithm.rollout_correction.rollout_rs} needs the rollout's own ` +
        `log-probs beside recomputed old ones: set actor_rollout_ref.rollout.calculate_log_probs=true`,
    );
  }
  return rs;
}
