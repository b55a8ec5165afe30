// GDPO's reward components (algorithm.adv_estimator=gdpo): the per-sequence scores of each of
// algorithm.gdpo_reward_keys, read from what the reward function returned beside its number (reward_extra_info, as
// verl reads them from non_tensor_batch), and verl's gdpo/<key>/{mean,std,max,min} metrics of them.

export interface GdpoRewardKeys {
  keys: readonly string[];
  weights: readonly number[] | null;
}

/** Each key's score per sequence (float32, as verl casts them), their weights, and verl's metrics. */
export function gdpoRewardKeyScores(
  settings: GdpoRewardKeys,
  rewardExtraInfo: readonly (Readonly<Record<string, unknown>> | null)[],
): { scores: number[][]; weights: readonly number[] | null; metrics: Record<string, number> } {
  if (settings.keys.length === 0)
    throw new Error(
      "GDPO requires 'algorithm.gdpo_reward_keys' listing the individual reward component keys returned by " +
        "compute_score (e.g. ['format_reward', 'accuracy_reward'])",
    );
  if (settings.weights !== null && settings.weights.length !== settings.keys.length)
    throw new Error(
      `algorithm.gdpo_reward_weights has ${settings.weights.length} weights for ${settings.keys.length} ` +
        'gdpo_reward_keys; expected one per key',
    );
  const metrics: Record<string, number> = {};
  const scores = settings.keys.map((key) => {
    const values = rewardExtraInfo.map((info, i) => {
      const value = info?.[key];
      if (typeof value !== 'number' && typeof value !== 'boolean')
        throw new Error(
          `GDPO reward key '${key}' not found in sequence ${i}'s reward result (algorithm.gdpo_reward_keys): make ` +
            `sure your compute_score returns a dict containing '${key}' (it returned keys ` +
            `${JSON.stringify(Object.keys(info ?? {}))})`,
        );
      return Math.fround(Number(value));
    });
    const mean = values.reduce((a, v) => a + v, 0) / values.length;
    Object.assign(metrics, {
      [`gdpo/${key}/mean`]: mean,
      // np.std: the biased (population) estimate.
      [`gdpo/${key}/std`]: Math.sqrt(values.reduce((a, v) => a + (v - mean) ** 2, 0) / values.length),
      [`gdpo/${key}/max`]: Math.max(...values),
      [`gdpo/${key}/min`]: Math.min(...values),
    });
    return values;
  });
  return { scores, weights: settings.weights, metrics };
}
