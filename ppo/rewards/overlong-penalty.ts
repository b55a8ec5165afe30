// DAPO's overlong reward shaping (verl's reward_model.reward_manager=dapo with
// reward_kwargs.overlong_buffer_cfg.enable): a response longer than max_resp_len − len tokens loses reward in
// proportion to how far into that buffer it reaches, up to penalty_factor at max_resp_len, so the policy learns
// to finish before truncation instead of being scored on cut-off text.

/** The reward_model.* and data.* keys the shaping reads, as the config spells them (the config fits). */
export interface OverlongPenaltyOptions {
  reward_model: {
    reward_manager: string;
    reward_kwargs: {
      overlong_buffer_cfg: { enable: boolean; len: number; penalty_factor: number };
      max_resp_len: number | null;
    };
  };
  data: { max_response_length: number };
}

/** The penalty (≤ 0) added to the score of a response of `responseLength` valid tokens; 0 when shaping is off. */
export function overlongPenalty(responseLength: number, config: OverlongPenaltyOptions): number {
  const { reward_manager: manager, reward_kwargs: kwargs } = config.reward_model;
  const buffer = kwargs.overlong_buffer_cfg;
  if (manager !== 'dapo' || !buffer.enable) return 0;
  const exceed = responseLength - ((kwargs.max_resp_len ?? config.data.max_response_length) - buffer.len);
  // verl's min(−exceed / len × factor, 0), with penalty_factor ≥ 0.
  return exceed <= 0 ? 0 : -(exceed / buffer.len) * buffer.penalty_factor;
}
