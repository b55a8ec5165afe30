// verl's policy losses (core_algos.POLICY_LOSS_REGISTRY, actor.policy_loss.loss_mode) declared as data, one entry
// per mode: from this table follow the config's choices and --help, the checks, the verl-case harness's registry,
// metric keys and fixed aggregations, and the policy-loss kernel's mode constants (LOSS_MODE_<NAME>, prepended to its
// WGSL); the math is the entry's `case` in policy-loss.wgsl and its branch in policy-loss.ref.ts. A leaf: imports
// nothing. `code` is explicit so that reordering the table cannot renumber the shader.

export interface PolicyLossModeSpec {
  name: string;
  /** The kernel's integer for the mode (WGSL const LOSS_MODE_<NAME>). */
  code: number;
  /** The verl function that defines it. */
  verlFunction: string;
  /** One line for --help and the docs. */
  help: string;
  /** The metric keys verl's function returns (default: pg_clipfrac, ppo_kl, pg_clipfrac_lower). */
  metrics?: readonly string[];
  /** The aggregation verl's function uses whatever loss_agg_mode says. */
  fixedAggregation?: 'seq-mean-token-mean' | 'token-mean';
  /** The host picks tokens by covariance first (covariance-selection.ts). */
  covarianceSelection?: boolean;
  /** Bypass mode may run it with its rejection mask (the policy term over the kept tokens). */
  takesPolicyMask?: boolean;
  /** verl's check of the resolved settings, in verl's words; null when they pass. */
  check?: (settings: PolicyLossSettings) => string | null;
}

/** The settings the checks read (PolicyLossConfig's fields). */
export interface PolicyLossSettings {
  clipRatioC: number;
  clipCovRatio?: number;
  klCovRatio?: number;
  droBeta?: number;
}

const ALL_METRICS = ['actor/pg_clipfrac', 'actor/ppo_kl', 'actor/pg_clipfrac_lower'] as const;

export const POLICY_LOSS_TABLE = [
  {
    name: 'vanilla',
    code: 0,
    verlFunction: 'compute_policy_loss_vanilla',
    help: 'token-level clipped PPO with dual clip',
    takesPolicyMask: true,
    check: (s) =>
      s.clipRatioC > 1
        ? null
        : 'actor.clip_ratio_c: The lower bound of the clip_ratio_c for dual-clip PPO should be greater than 1.0, ' +
          `but get the value: ${s.clipRatioC}.`,
  },
  {
    name: 'gspo',
    code: 1,
    verlFunction: 'compute_policy_loss_gspo',
    help: 'GSPO: the sequence-level ratio, clipped',
    fixedAggregation: 'seq-mean-token-mean',
  },
  {
    name: 'gpg',
    code: 2,
    verlFunction: 'compute_policy_loss_gpg',
    help: 'GPG: −A·log π',
    metrics: [],
    takesPolicyMask: true,
  },
  {
    name: 'geo_mean',
    code: 3,
    verlFunction: 'compute_policy_loss_geo_mean',
    help: 'GMPO: the geometric mean of clipped token ratios per sequence',
    fixedAggregation: 'token-mean',
  },
  {
    name: 'cispo',
    code: 4,
    verlFunction: 'compute_policy_loss_cispo',
    help: 'CISPO: −sg(clip(ratio))·A·log π',
  },
  {
    name: 'sapo',
    code: 5,
    verlFunction: 'compute_policy_loss_sapo',
    help: 'SAPO: a sigmoid gate of the ratio (tau_pos, tau_neg)',
    fixedAggregation: 'seq-mean-token-mean',
  },
  {
    name: 'clip_cov',
    code: 6,
    verlFunction: 'compute_policy_loss_clip_cov',
    help: 'Clip-Cov: no gradient for a few high-covariance tokens',
    metrics: ['actor/pg_clipfrac', 'actor/ppo_kl'],
    covarianceSelection: true,
    check: (s) =>
      (s.clipCovRatio ?? 0) > 0 ? null : 'clip_ratio should be larger than 0. (actor.policy_loss.clip_cov_ratio)',
  },
  {
    name: 'kl_cov',
    code: 7,
    verlFunction: 'compute_policy_loss_kl_cov',
    help: 'KL-Cov: a |log-ratio| penalty on the highest-covariance tokens',
    metrics: ['actor/ppo_kl'],
    covarianceSelection: true,
    check: (s) =>
      (s.klCovRatio ?? 0) > 0 ? null : 'kl_cov_ratio should be larger than 0. (actor.policy_loss.kl_cov_ratio)',
  },
  {
    name: 'dppo_tv',
    code: 8,
    verlFunction: 'compute_policy_loss_dppo_tv',
    help: 'DPPO-Binary-TV: clip_ratio_low/high bound how far a token probability moves (total variation)',
  },
  {
    name: 'dppo_kl',
    code: 9,
    verlFunction: 'compute_policy_loss_dppo_kl',
    help: 'DPPO-Binary-KL: clip_ratio_low/high bound the binary KL of a token probability',
  },
  {
    name: 'dro',
    code: 10,
    verlFunction: 'compute_policy_loss_dro',
    help: 'DRO: −(A·log π − dro_beta/2·(log π − log π_old)²)',
    metrics: ['actor/ppo_kl'],
    check: (s) =>
      (s.droBeta ?? 0) > 0
        ? null
        : `policy_loss.dro_beta must be a positive value when using DRO (actor.policy_loss.dro_beta, got ` +
          `${s.droBeta ?? null})`,
  },
] as const satisfies readonly PolicyLossModeSpec[];

export type PolicyLossMode = (typeof POLICY_LOSS_TABLE)[number]['name'];

export const POLICY_LOSS_MODES: readonly PolicyLossMode[] = POLICY_LOSS_TABLE.map((m) => m.name);

export function lossModeSpec(mode: string): PolicyLossModeSpec | undefined {
  return (POLICY_LOSS_TABLE as readonly PolicyLossModeSpec[]).find((m) => m.name === mode);
}

/** The metric keys verl's function for `mode` returns. */
export function policyLossMetrics(mode: string): readonly string[] {
  return lossModeSpec(mode)?.metrics ?? ALL_METRICS;
}

/** `const LOSS_MODE_<NAME>: u32 = <code>u;` per mode, prepended to policy-loss.wgsl for its switch. */
export function policyLossModeConstants(): string {
  return POLICY_LOSS_TABLE.map((m) => `const LOSS_MODE_${m.name.toUpperCase()}: u32 = ${m.code}u;`).join('\n');
}

/** "vanilla (…), gspo (…), …" for --help and errors. */
export function policyLossModesHelp(): string {
  return POLICY_LOSS_TABLE.map((m) => `${m.name} (${m.help})`).join('; ');
}
