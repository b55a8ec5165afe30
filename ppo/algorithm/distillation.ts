// On-policy distillation's loss settings (verl 1dda039b's distillation.distillation_loss, DistillationLossConfig)
// and its registry of loss modes declared as data (verl's register_distillation_loss): the single-sample KL
// estimators of the teacher's log-prob of the sampled token, and forward_kl_topk over the teacher's top-k. The
// float64 references are kernels/ppo/distillation-loss.ref.ts; the trainer phase that runs teachers is not built yet
// (docs/training.md says so).

export interface DistillationLossModeSpec {
  names: readonly string[];
  /** kl_penalty(student, teacher, mode) per sampled token: the teacher's log-prob of that token is enough. */
  useEstimator?: boolean;
  /** The teacher's top-k log-probs and ids per position (distillation_loss.topk of them). */
  useTopk?: boolean;
}

export const DISTILLATION_LOSS_TABLE = [
  { names: ['kl', 'k1', 'abs', 'mse', 'k2', 'low_var_kl', 'k3'], useEstimator: true },
  { names: ['forward_kl_topk'], useTopk: true },
] as const satisfies readonly DistillationLossModeSpec[];

export const DISTILLATION_LOSS_MODES: readonly string[] = DISTILLATION_LOSS_TABLE.flatMap((m) => m.names);

export function distillationLossModeSpec(mode: string): DistillationLossModeSpec | undefined {
  return (DISTILLATION_LOSS_TABLE as readonly DistillationLossModeSpec[]).find((m) => m.names.includes(mode));
}

/** distillation.distillation_loss.*, verl's names and defaults. */
export interface DistillationLossSettings {
  loss_mode: string;
  topk: number | null;
  use_task_rewards: boolean;
  distillation_loss_coef: number;
  loss_max_clamp: number | null;
  log_prob_min_clamp: number | null;
  use_policy_gradient: boolean;
  policy_loss_mode: string;
  clip_ratio: number;
  clip_ratio_low: number;
  clip_ratio_high: number;
}

export const DISTILLATION_LOSS_DEFAULTS: DistillationLossSettings = {
  loss_mode: 'k3',
  topk: 128,
  use_task_rewards: true,
  distillation_loss_coef: 1.0,
  loss_max_clamp: 10.0,
  log_prob_min_clamp: -10.0,
  use_policy_gradient: true,
  policy_loss_mode: 'vanilla',
  clip_ratio: 0.2,
  clip_ratio_low: 0.2,
  clip_ratio_high: 0.2,
};

const KEY = 'distillation.distillation_loss';

/** verl's DistillationLossConfig.__post_init__ checks, in its words, naming the key. */
export function checkDistillationLoss(settings: DistillationLossSettings): void {
  if (!distillationLossModeSpec(settings.loss_mode))
    throw new Error(
      `Unsupported loss mode: ${settings.loss_mode}. Supported modes are: ${DISTILLATION_LOSS_MODES.join(', ')} ` +
        `(${KEY}.loss_mode)`,
    );
  if (settings.policy_loss_mode !== 'vanilla')
    throw new Error(
      'Only vanilla policy loss is currently supported when use_policy_gradient is True, but got ' +
        `${settings.policy_loss_mode}. (${KEY}.policy_loss_mode)`,
    );
  if (!settings.use_policy_gradient && settings.loss_mode === 'k1')
    throw new Error(
      'Directly backpropagating k1 loss is incorrect since gradient of k1 loss wrt model weights does not depend on ' +
        `teacher log probabilities. (${KEY}.loss_mode=k1 with use_policy_gradient=false)`,
    );
  if (distillationLossModeSpec(settings.loss_mode)?.useTopk && !(settings.topk !== null && settings.topk > 0))
    throw new Error(`topk must be specified when use_topk is True. (${KEY}.topk)`);
}
