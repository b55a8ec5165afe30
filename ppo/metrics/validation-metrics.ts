// verl's validation metrics (ray_trainer._val_metrics_update over metric_utils.process_validation_metrics). The
// variables of each response are `reward` (its final reward) and every entry of what its reward function returned
// when that was a dict (verl's reward_extra_info: `score` and e.g. `acc`, `pred`). Per data source, variable and
// prompt, over the prompt's n responses: mean@n; with n > 1 also std@n and, for k = 2, 4, 8, … below n and n itself,
// best@k and worst@k (the max and min of k responses drawn with replacement, as mean and std over 1,000 bootstrap
// draws) and, when the responses carry a `pred`, maj@k (the value of the answer most of the k drawn responses gave).
// Each is averaged over the data source's prompts. The core variable (`acc` when the reward reports one, else
// `reward`) at k = n for mean, maj and best is logged as val-core/<data_source>/<variable>/<metric>; everything else
// as val-aux/. Bootstrap draws use this engine's Rng (seed 42 as verl's), so those estimates match verl's in
// distribution, not digit for digit.
import { Rng } from '../../engine/rng.ts';

export interface ValidationResponse {
  dataSource: string;
  /** The prompt it answers (verl's uid): responses to one prompt are its n samples. */
  prompt: number;
  reward: number;
  /** What the reward function returned beside the plain number (null: it returned a number). */
  rewardExtraInfo: Readonly<Record<string, unknown>> | null;
}

const BOOTSTRAP_DRAWS = 1000;
const BOOTSTRAP_SEED = 42;

/** verl's subset sizes: 2, 4, 8, … below n, then n (none for n = 1). */
function subsetSizes(n: number): number[] {
  if (n <= 1) return [];
  const sizes: number[] = [];
  for (let k = 2; k < n; k *= 2) sizes.push(k);
  sizes.push(n);
  return sizes;
}

function mean(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0) / values.length;
}

/** Population standard deviation (numpy's np.std). */
function std(values: readonly number[]): number {
  const m = mean(values);
  return Math.sqrt(mean(values.map((v) => (v - m) ** 2)));
}

/** A variable's values as numbers: numbers and booleans (np.mean averages True as 1); null when any value is
 *  something else (verl skips string variables, and `pred` votes rather than averages). */
function numericValues(values: readonly unknown[]): number[] | null {
  const out: number[] = [];
  for (const v of values) {
    if (typeof v === 'boolean') out.push(v ? 1 : 0);
    else if (typeof v === 'number' && Number.isFinite(v)) out.push(v);
    else return null;
  }
  return out;
}

/**
 * verl's calc_maj_val: the value of the first response giving the answer given most often (ties: the answer seen
 * first).
 */
function majorityValue(values: readonly number[], votes: readonly string[]): number {
  const counts = new Map<string, { count: number; value: number }>();
  votes.forEach((vote, i) => {
    const entry = counts.get(vote);
    if (entry) entry.count++;
    else counts.set(vote, { count: 1, value: values[i] });
  });
  let best: { count: number; value: number } | null = null;
  for (const entry of counts.values()) if (!best || entry.count > best.count) best = entry;
  return best!.value;
}

/** Mean and std, over bootstrap draws of k of `values` with replacement, of each reduction of a draw's indices. */
function bootstrap(
  n: number,
  k: number,
  reductions: readonly ((indices: readonly number[]) => number)[],
): [number, number][] {
  const rng = new Rng(BOOTSTRAP_SEED);
  const results = reductions.map(() => new Array<number>(BOOTSTRAP_DRAWS));
  const indices = new Array<number>(k);
  for (let draw = 0; draw < BOOTSTRAP_DRAWS; draw++) {
    for (let j = 0; j < k; j++) indices[j] = Math.floor(rng.next() * n);
    reductions.forEach((reduce, r) => (results[r][draw] = reduce(indices)));
  }
  return results.map((r) => [mean(r), std(r)]);
}

/** The metrics of one prompt's responses for one variable, by verl's metric names. */
function promptMetrics(values: readonly number[], votes: readonly string[] | null): Map<string, number> {
  const n = values.length;
  const metrics = new Map<string, number>([[`mean@${n}`, mean(values)]]);
  if (n === 1) return metrics;
  metrics.set(`std@${n}`, std(values));
  for (const k of subsetSizes(n)) {
    const pick = (indices: readonly number[]) => indices.map((i) => values[i]);
    const [[bestMean, bestStd], [worstMean, worstStd]] = bootstrap(n, k, [
      (ix) => Math.max(...pick(ix)),
      (ix) => Math.min(...pick(ix)),
    ]);
    metrics
      .set(`best@${k}/mean`, bestMean)
      .set(`best@${k}/std`, bestStd)
      .set(`worst@${k}/mean`, worstMean)
      .set(`worst@${k}/std`, worstStd);
    if (votes) {
      const [[majMean, majStd]] = bootstrap(n, k, [
        (ix) =>
          majorityValue(
            pick(ix),
            ix.map((i) => votes[i]),
          ),
      ]);
      metrics.set(`maj@${k}/mean`, majMean).set(`maj@${k}/std`, majStd);
    }
  }
  return metrics;
}

/** val-core/… and val-aux/… metrics of a validation's responses, as verl names them. */
export function validationMetrics(responses: readonly ValidationResponse[]): Record<string, number> {
  // data source → prompt → that prompt's responses, in order
  const bySource = new Map<string, Map<number, ValidationResponse[]>>();
  for (const r of responses) {
    const prompts = bySource.get(r.dataSource) ?? new Map<number, ValidationResponse[]>();
    bySource.set(r.dataSource, prompts);
    const list = prompts.get(r.prompt) ?? [];
    prompts.set(r.prompt, list);
    list.push(r);
  }
  const out: Record<string, number> = {};
  for (const [source, prompts] of bySource) {
    // variable → metric → one value per prompt
    const collected = new Map<string, Map<string, number[]>>();
    for (const group of prompts.values()) {
      const variables = new Map<string, unknown[]>([['reward', group.map((r) => r.reward)]]);
      for (const key of new Set(group.flatMap((r) => Object.keys(r.rewardExtraInfo ?? {})))) {
        variables.set(
          key,
          group.map((r) => r.rewardExtraInfo?.[key]),
        );
      }
      const preds = variables.get('pred');
      const votes = preds ? preds.map((p) => JSON.stringify(p)) : null;
      for (const [name, raw] of variables) {
        const values = numericValues(raw);
        if (!values) continue;
        const metrics = collected.get(name) ?? new Map<string, number[]>();
        collected.set(name, metrics);
        for (const [metric, value] of promptMetrics(values, votes))
          metrics.set(metric, [...(metrics.get(metric) ?? []), value]);
      }
    }
    const core = collected.has('acc') ? 'acc' : 'reward';
    for (const [name, metrics] of collected) {
      const nMax = Math.max(...[...metrics.keys()].map((m) => Number(m.split('@')[1].split('/')[0])));
      for (const [metric, perPrompt] of metrics) {
        const isCore =
          name === core && ['mean', 'maj', 'best'].some((p) => metric.startsWith(p)) && metric.includes(`@${nMax}`);
        out[`${isCore ? 'val-core' : 'val-aux'}/${source}/${name}/${metric}`] = mean(perPrompt);
      }
    }
  }
  return out;
}
