// The verl versions tools/verl-case.ts answers as, and what changed between them. A recorded case names its version
// by profile (or verl_commit): `legacy_v020` / `search_r1` → v0.2.0.post2 and Search-R1's fork of it, `head` →
// volcengine/verl b178a3cd (the January main the first suite was recorded at), `verl_1dda039b` →
// verl-project/verl 1dda039b (2026-08-22). A case that names neither gets the newest. The trainer always computes as
// the newest; the older behaviours below are switches only the harness sets.

export type VerlVersion = 'v02' | 'b178a3cd' | '1dda039b';

export const NEWEST_VERL: VerlVersion = '1dda039b';

export interface VerlBehaviour {
  /** The name error messages give the version. */
  label: string;
  /**
   * agg_loss: seq-mean-token-sum-norm divides by the global batch size (Dr. GRPO's aggregation) and token-sum exists;
   * b178a3cd summed all sequences and divided by loss_scale_factor alone.
   */
  seqMeanTokenSumNormPerBatch: boolean;
  /** agg_loss raises when dp_size > 1 and the mode's global normaliser is None (b178a3cd used the local count). */
  dpNeedsGlobalNormaliser: boolean;
  /** compute_value_loss forwards dp_size, batch_num_tokens, global_batch_size and loss_scale_factor to agg_loss. */
  valueLossTakesGlobalInfo: boolean;
  /** REINFORCE++ carries the running return across mask-0 spans (b178a3cd reset it to 0 there). */
  reinforcePlusPlusCarriesAcrossMask: boolean;
  /** grpo_vectorized's std is sqrt(max(var, floor)) with floor = epsilon (b178a3cd) or 0 (1dda039b). */
  grpoVectorizedFloorsVarianceAtEpsilon: boolean;
  /** handle_zero_tail when the optimal token baselines are called without it. */
  otbHandleZeroTailDefault: { optimal_token_baseline: boolean; tir_optimal_token_baseline: boolean };
  /** The optimal token baselines end in **kwargs (so ray_trainer.compute_advantage may pass config). */
  otbTakesKwargs: boolean;
  /** rollout-correction IS metrics come from the applied (truncated) weights; IcePop "lower_upper" thresholds. */
  isMetricsFromAppliedWeights: boolean;
  /** math_dapo.verify falls back to the last \boxed{} when the Minerva answer line is missing. */
  mathDapoBoxedFallback: boolean;
  /** kl_penalty strips a "+" name's suffix (straight-through k2 gradient) instead of raising. */
  klPlusNames: boolean;
  /** Policy losses the version registers beyond the b178a3cd set. */
  newPolicyLosses: readonly string[];
  /** Advantage estimators the version registers beyond the b178a3cd set. */
  newEstimators: readonly string[];
}

const B178A3CD: VerlBehaviour = {
  label: 'main b178a3cd',
  seqMeanTokenSumNormPerBatch: false,
  dpNeedsGlobalNormaliser: false,
  valueLossTakesGlobalInfo: false,
  reinforcePlusPlusCarriesAcrossMask: false,
  grpoVectorizedFloorsVarianceAtEpsilon: true,
  otbHandleZeroTailDefault: { optimal_token_baseline: false, tir_optimal_token_baseline: true },
  otbTakesKwargs: false,
  isMetricsFromAppliedWeights: false,
  mathDapoBoxedFallback: false,
  klPlusNames: false,
  newPolicyLosses: [],
  newEstimators: [],
};

export const VERL_VERSIONS: Record<VerlVersion, VerlBehaviour> = {
  // v0.2 has none of main's later features; the switches v0.2 routes read are those of b178a3cd.
  v02: { ...B178A3CD, label: 'v0.2' },
  b178a3cd: B178A3CD,
  '1dda039b': {
    label: 'verl-project 1dda039b',
    seqMeanTokenSumNormPerBatch: true,
    dpNeedsGlobalNormaliser: true,
    valueLossTakesGlobalInfo: true,
    reinforcePlusPlusCarriesAcrossMask: true,
    grpoVectorizedFloorsVarianceAtEpsilon: false,
    otbHandleZeroTailDefault: { optimal_token_baseline: true, tir_optimal_token_baseline: true },
    otbTakesKwargs: true,
    isMetricsFromAppliedWeights: true,
    mathDapoBoxedFallback: true,
    klPlusNames: true,
    newPolicyLosses: ['dppo_tv', 'dppo_kl', 'dro'],
    newEstimators: ['gdpo'],
  },
};

/** profile → version; the commit prefixes recognise a case that names only its verl_commit. */
const PROFILES: Record<string, VerlVersion> = {
  legacy_v020: 'v02',
  search_r1: 'v02',
  head: 'b178a3cd',
  verl_1dda039b: '1dda039b',
};
const COMMITS: [RegExp, VerlVersion][] = [
  [/^(fb532783|a14dc3a)/, 'v02'],
  [/^b178a3cd/, 'b178a3cd'],
  [/^1dda039b/, '1dda039b'],
];

/** The version a case answers as: its profile, else its verl_commit, else the newest. */
export function verlVersionOf(profile: string | undefined, commit: string | undefined): VerlVersion {
  if (profile !== undefined && PROFILES[profile]) return PROFILES[profile];
  return COMMITS.find(([prefix]) => prefix.test(commit ?? ''))?.[1] ?? NEWEST_VERL;
}
