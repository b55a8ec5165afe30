// On-policy distillation's settings (verl 1dda039b's distillation.*, DistillationConfig and DistillationLossConfig):
// the registry of loss modes declared as data (verl's register_distillation_loss): the single-sample KL estimators
// of the teacher's log-prob of the sampled token, and forward_kl_topk over the teacher's top-k; the teachers as
// verl resolves them (one: key "default", every sample; several: keyed by .key, routed by teacher_key), and the
// checks a run makes before loading anything. The float64 references are kernels/ppo/distillation-loss.ref.ts;
// the teachers' forward is ppo/phases/experience.ts (teacherLogProbs), the loss ppo/phases/actor-update.ts.
import type { PpoConfig, TeacherModel } from '../config/schema.ts';

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

/** One frozen teacher, as verl's _resolve_teacher_models keys it. */
export interface TeacherSpec {
  /** Its teacher_models entry name (where its keys are). */
  name: string;
  /** The teacher_key value it serves ("default" for a single teacher, which serves every sample). */
  key: string;
  modelPath: string;
}

const TEACHERS = 'distillation.teacher_models';

/** verl's DistillationConfig._resolve_teacher_models: a single teacher_model entry is keyed "default"; with several,
 *  teacher_model is dropped and each is keyed by its .key (which must be set and unique); every model_path must be
 *  set. Throws verl's message, naming the key. */
export function resolveTeachers(models: Readonly<Record<string, TeacherModel>>): TeacherSpec[] {
  const names = Object.keys(models);
  const single = names.length === 1;
  const teachers: TeacherSpec[] = [];
  for (const name of single ? names : names.filter((n) => n !== 'teacher_model')) {
    const { key, model_path: modelPath } = models[name];
    if (modelPath === null)
      throw new Error(
        `model_path must be specified for distillation teacher model config. (${TEACHERS}.${name}.model_path)`,
      );
    const resolved = single ? 'default' : key;
    if (resolved === null)
      throw new Error(`key must be specified for distillation teacher model config. (${TEACHERS}.${name}.key)`);
    if (teachers.some((t) => t.key === resolved))
      throw new Error(`Duplicate teacher key ${resolved} found in teacher models. (${TEACHERS}.${name}.key)`);
    teachers.push({ name, key: resolved, modelPath });
  }
  return teachers;
}

/** verl's _resolve_teacher_key: the index of the teacher that scores a sample whose teacher_key column holds
 *  `routingValue` (a single teacher scores all). */
export function teacherFor(teachers: readonly TeacherSpec[], teacherKey: string, routingValue: unknown): number {
  if (teachers.length === 1) return 0;
  if (routingValue === null || routingValue === undefined)
    throw new Error(
      `Routing key is required for multi-teacher distillation (configured via distillation.teacher_key=${teacherKey})`,
    );
  const index = teachers.findIndex((t) => t.key === String(routingValue));
  if (index < 0)
    throw new Error(
      `No teacher configured for routing key ${String(routingValue)}. Configured teachers: ` +
        `${teachers.map((t) => t.key).join(', ')} (distillation.teacher_key=${teacherKey})`,
    );
  return index;
}

/** What a step needs of distillation.*, resolved once (ppo/step-plan.ts). */
export interface DistillationPlan {
  teachers: TeacherSpec[];
  teacherKey: string;
  loss: DistillationLossSettings;
  /** forward_kl_topk: the teachers' top-k per position; otherwise the sampled token's log-prob. */
  useTopk: boolean;
}

/** distillation.enabled: the plan; null when off. Throws verl's message for a bad loss setting or teacher. */
export function planDistillation(config: PpoConfig): DistillationPlan | null {
  const d = config.distillation;
  if (!d.enabled) return null;
  checkDistillationLoss(d.distillation_loss);
  if (
    d.distillation_loss.loss_mode === 'forward_kl_topk' &&
    config.algorithm.use_pf_ppo &&
    config.algorithm.adv_estimator === 'gae'
  )
    throw new Error(
      "distillation.distillation_loss.loss_mode=forward_kl_topk with algorithm.use_pf_ppo: PF-PPO's resampling does " +
        "not carry the teachers' top-k — use a sampled-token mode (k3, …) or use_pf_ppo=false",
    );
  return {
    teachers: resolveTeachers(d.teacher_models),
    teacherKey: d.teacher_key,
    loss: d.distillation_loss,
    useTopk: distillationLossModeSpec(d.distillation_loss.loss_mode)?.useTopk === true,
  };
}

/** distillation.enabled's checks before a run loads anything, one line each (verl raises them when its trainer
 *  builds its config; --cfg job prints the composition without them, as Hydra does). */
export function distillationProblems(config: PpoConfig): string[] {
  try {
    planDistillation(config);
    return [];
  } catch (err) {
    return [(err as Error).message];
  }
}
