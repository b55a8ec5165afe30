// verl's rollout_rs specification (algorithm.rollout_correction.rollout_rs and rollout_rs_threshold) parsed into
// rejection criteria, and rollout_is_threshold into TIS or IcePop bounds: the config checks refuse a bad spec at
// composition (--cfg job), and the step plan hands them to ppo/algorithm/rollout-correction.ts, which applies them.

/** verl's rollout_rs options (rollout_corr_helper.SUPPORTED_ROLLOUT_RS_OPTIONS): a divergence estimator of the
 *  log-ratio lr = old − rollout log-prob (k1 = −lr, k2 = lr²/2, k3 = e^lr − 1 − lr) per token, or its sum, mean or
 *  max over each sequence. */
export const ROLLOUT_RS_OPTIONS = [
  'token_k1',
  'token_k2',
  'token_k3',
  'seq_sum_k1',
  'seq_sum_k2',
  'seq_sum_k3',
  'seq_mean_k1',
  'seq_mean_k2',
  'seq_mean_k3',
  'seq_max_k2',
  'seq_max_k3',
] as const;
export type RolloutRsOption = (typeof ROLLOUT_RS_OPTIONS)[number];

/** One rejection criterion: k1 options keep a statistic within [log lower, log upper], the others up to `upper`. */
export interface RolloutRsCriterion {
  option: RolloutRsOption;
  upper: number;
  lower: number | null;
}

/** verl's levels before the k1/k2/k3 options (v0.6): the k1 option that thresholds the same ratio. */
const RETIRED_RS_LEVELS: Record<string, RolloutRsOption> = {
  token: 'token_k1',
  sequence: 'seq_sum_k1',
  geometric: 'seq_mean_k1',
};

const RS_KEY = 'algorithm.rollout_correction.rollout_rs';
const RS_THRESHOLD_KEY = 'algorithm.rollout_correction.rollout_rs_threshold';

/** verl's option list (comma-separated, duplicates dropped) and _parse_rollout_rs_thresholds: one threshold shared
 *  by every option or one per option; a k1 option takes LOWER_UPPER ratio bounds, or UPPER with lower = 1/UPPER. */
export function parseRolloutRs(options: string, thresholds: string | null): RolloutRsCriterion[] {
  const names = [
    ...new Set(
      options
        .split(',')
        .map((o) => o.trim())
        .filter((o) => o !== ''),
    ),
  ];
  if (names.length === 0) throw new Error(`${RS_KEY} must name at least one option (${ROLLOUT_RS_OPTIONS.join(', ')})`);
  for (const name of names) {
    if (name in RETIRED_RS_LEVELS) {
      throw new Error(
        `${RS_KEY}=${name} is verl's older spelling; verl main writes ${RETIRED_RS_LEVELS[name]} (ratio bounds as ` +
          `${RS_THRESHOLD_KEY}=LOWER_UPPER)`,
      );
    }
    if (!(ROLLOUT_RS_OPTIONS as readonly string[]).includes(name))
      throw new Error(`${RS_KEY}: unknown option "${name}" (expected one of ${ROLLOUT_RS_OPTIONS.join(', ')})`);
  }
  if (thresholds === null)
    throw new Error(
      `${RS_KEY}=${options} needs ${RS_THRESHOLD_KEY} (verl: "rollout_rs_threshold must be explicitly provided")`,
    );
  let specs = thresholds
    .split(',')
    .map((t) => t.trim())
    .filter((t) => t !== '');
  if (specs.length !== 1 && specs.length !== names.length) {
    throw new Error(
      `${RS_THRESHOLD_KEY}=${thresholds}: expected one threshold shared by all options or exactly ${names.length} ` +
        `(one per ${RS_KEY} option), got ${specs.length}`,
    );
  }
  if (specs.length === 1) specs = names.map(() => specs[0]);
  const positiveNumber = (text: string, spec: string, option: string) => {
    const value = text.trim() === '' ? NaN : Number(text);
    if (!(value > 0))
      throw new Error(
        `${RS_THRESHOLD_KEY}: "${spec}" for option ${option} must be a positive ` +
          `number${option.endsWith('k1') ? ' or LOWER_UPPER of positive numbers' : ''}`,
      );
    return value;
  };
  return names.map((name, i) => {
    const option = name as RolloutRsOption;
    const spec = specs[i];
    if (option.endsWith('k1')) {
      const cut = spec.indexOf('_');
      const upper = positiveNumber(cut < 0 ? spec : spec.slice(cut + 1), spec, option);
      const lower = cut < 0 ? 1 / upper : positiveNumber(spec.slice(0, cut), spec, option);
      if (lower > upper)
        throw new Error(`Thresholds for option '${option}' must be lower <= upper, got ${spec} (${RS_THRESHOLD_KEY})`);
      return { option, upper, lower };
    }
    if (spec.includes('_'))
      throw new Error(`${RS_THRESHOLD_KEY}: option ${option} takes a single upper bound, not LOWER_UPPER "${spec}"`);
    return { option, upper: positiveNumber(spec, spec, option), lower: null };
  });
}

const IS_THRESHOLD_KEY = 'algorithm.rollout_correction.rollout_is_threshold';

/** rollout_is's bounds: TIS clamps the weights to `upper` (lower null); IcePop zeroes those outside [lower, upper]. */
export interface RolloutIsThreshold {
  upper: number;
  lower: number | null;
}

/** verl 1dda039b's _parse_rollout_is_threshold: a number or float string is TIS's upper bound, "LOWER_UPPER" IcePop's
 *  bounds; both positive, lower ≤ upper. */
export function parseRolloutIsThreshold(spec: number | string): RolloutIsThreshold {
  if (typeof spec === 'boolean')
    throw new Error(`${IS_THRESHOLD_KEY} must be a float or a string threshold specification, not a boolean`);
  const text = String(spec).trim();
  if (text === '') throw new Error(`${IS_THRESHOLD_KEY} must not be an empty string`);
  const number = (part: string) => {
    const value = part.trim() === '' ? NaN : Number(part);
    if (Number.isNaN(value)) throw new Error(`Invalid rollout_is_threshold '${spec}' (${IS_THRESHOLD_KEY})`);
    return value;
  };
  const cut = text.indexOf('_');
  const upper = number(cut < 0 ? text : text.slice(cut + 1));
  const lower = cut < 0 ? null : number(text.slice(0, cut));
  if (!(upper > 0))
    throw new Error(`rollout_is_threshold upper bound must be positive, got ${upper} (${IS_THRESHOLD_KEY})`);
  if (lower !== null && !(lower > 0))
    throw new Error(`rollout_is_threshold lower bound must be positive, got ${lower} (${IS_THRESHOLD_KEY})`);
  if (lower !== null && lower > upper)
    throw new Error(`rollout_is_threshold lower bound must be <= upper bound, got ${spec} (${IS_THRESHOLD_KEY})`);
  return { upper, lower };
}
