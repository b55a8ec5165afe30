// The settings panel as config overrides on top of the embedded default job, so the page trains with exactly
// the keys `node train.js key=value` takes, and shows that command. The run is scaled down for a tab: fewer prompts
// per step and a smaller held-out set, validated every VALIDATION_EVERY steps.
import { loadConfig, type PpoConfig } from '../../ppo/config.ts';
import { DEFAULT_JOB } from '../../ppo/tasks/default-job.ts';
import { BUILTIN_TASKS } from '../../ppo/tasks/builtin-tasks.ts';
import { SHIPPED_CHECKPOINT_PATH } from './shipped-checkpoint.ts';

export interface DemoSettings {
  estimator: 'gae' | 'grpo';
  lr: number;
  /** β of the KL penalty in the reward; 0 turns the penalty (and the reference model) off. */
  klCoef: number;
  rewardMaskRatio: number;
  freezeCritic: boolean;
  /** trainer.seed; also data.seed when the warm start runs live. */
  seed: number;
  /**
   * Start from the shipped checkpoint, warm-started with data.seed `dataSeed` (the run keeps that seed, so it
   * validates on prompts the warm start never saw); null: warm start live in the tab.
   */
  checkpoint: { dataSeed: number } | null;
  /** Steps of a live warm start. */
  warmStartSteps: number;
  /** data.train_batch_size: prompts per PPO step. */
  batchSize: number;
  /** trainer.total_training_steps */
  steps: number;
}

/** GRPO's group baseline needs several samples of each prompt. */
export const GRPO_SAMPLES_PER_PROMPT = 4;
export const VALIDATION_EVERY = 5;
export const DEMO_VAL_SIZE = 64;
export const WARM_START_BATCH = 32;

/** `checkpoint`: the shipped checkpoint's data.seed, null where the page has none. */
export function readSettings(form: HTMLFormElement, checkpoint: { dataSeed: number } | null): DemoSettings {
  const field = (name: string) => form.elements.namedItem(name) as HTMLInputElement;
  const num = (name: string) => Number(field(name).value);
  return {
    estimator: field('estimator').value === 'grpo' ? 'grpo' : 'gae',
    lr: num('lr'),
    klCoef: num('klCoef'),
    rewardMaskRatio: num('rewardMaskRatio'),
    freezeCritic: field('freezeCritic').checked,
    seed: num('seed'),
    checkpoint: field('startFrom').value === 'checkpoint' ? checkpoint : null,
    warmStartSteps: num('warmStartSteps'),
    batchSize: num('batchSize'),
    steps: num('steps'),
  };
}

export function configOverrides(s: DemoSettings): string[] {
  const grpo = s.estimator === 'grpo';
  return [
    `algorithm.adv_estimator=${s.estimator}`,
    `actor_rollout_ref.rollout.n=${grpo ? GRPO_SAMPLES_PER_PROMPT : 1}`,
    `actor_rollout_ref.actor.optim.lr=${s.lr}`,
    `algorithm.use_kl_in_reward=${s.klCoef > 0}`,
    `algorithm.kl_ctrl.kl_coef=${s.klCoef}`,
    `algorithm.reward_mask_ratio=${s.rewardMaskRatio}`,
    `critic.freeze=${s.freezeCritic}`,
    ...(s.checkpoint ? [`actor_rollout_ref.model.path=${SHIPPED_CHECKPOINT_PATH}`] : []),
    `trainer.seed=${s.seed}`,
    `data.seed=${s.checkpoint?.dataSeed ?? s.seed}`,
    `data.train_batch_size=${s.batchSize}`,
    // Two optimizer steps per PPO step, as in the default job (128 prompts, mini-batches of 64).
    `actor_rollout_ref.actor.ppo_mini_batch_size=${Math.max(1, Math.floor(s.batchSize / 2))}`,
    `trainer.total_training_steps=${s.steps}`,
    `trainer.test_freq=${VALIDATION_EVERY}`,
  ];
}

/**
 * The same run from the command line, and what the tab does differently. The built-in job's layer is named: the
 * command line applies it by itself only when no model is given, and the shipped checkpoint is one.
 */
export function trainCommand(s: DemoSettings): { command: string; differences: string[] } {
  return {
    command: ['node train.js', '--config', DEFAULT_JOB.source, ...configOverrides(s)].join(' '),
    differences: [
      `the tab validates on ${DEMO_VAL_SIZE} held-out prompts, node train.js on the task's ` +
        `${BUILTIN_TASKS.arithmetic.valSize}`,
      ...(s.checkpoint
        ? []
        : [`the tab's live warm start has ${s.warmStartSteps} steps, node train.js runs the task's full warm start`]),
    ],
  };
}

/** The resolved configuration; throws ConfigError (with every problem listed) on an invalid setting. */
export function demoConfig(s: DemoSettings): PpoConfig {
  return loadConfig({ layers: [DEFAULT_JOB], overrides: configOverrides(s) });
}
