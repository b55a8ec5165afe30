// DAPO's dynamic sampling (verl recipe/dapo/dapo_ray_trainer.py, fit(), algorithm.filter_groups): a prompt group
// whose responses all got the same metric value teaches GRPO nothing (zero advantage), so it is dropped, and
// generation batches of data.gen_batch_size prompts are drawn until data.train_batch_size prompts' groups are kept.
import type { RolloutBatch } from '../generation/types.ts';
import { rolloutRows } from '../training/batch-rows.ts';

/** One generation batch after its reward: its prompts, rollout (groupIds index `records`), and each sample's score. */
export interface ScoredBatch<R> {
  records: R[];
  rollout: RolloutBatch;
  scores: number[];
  rewardExtraInfo: (Record<string, unknown> | null)[];
}

/**
 * Each sample's value of algorithm.filter_groups.metric, as verl reads non_tensor_batch[metric]: seq_reward and
 * seq_final_reward are the sequence's summed score (without a KL penalty in the reward the two are equal; the
 * config check refuses seq_final_reward with use_kl_in_reward); any other name is the reward's extra field of
 * that name, and acc or score fall back to the sequence score when the reward returned a plain number.
 */
export function filterMetricValues(
  metric: string,
  scores: readonly number[],
  rewardExtraInfo: readonly (Record<string, unknown> | null)[],
): number[] {
  if (metric === 'seq_reward' || metric === 'seq_final_reward') return [...scores];
  return scores.map((score, i) => {
    const extra = rewardExtraInfo[i];
    const value = extra?.[metric];
    if (typeof value === 'number' || typeof value === 'boolean') return Number(value);
    if (value === undefined && (metric === 'acc' || metric === 'score')) return score;
    throw new Error(
      `algorithm.filter_groups.metric=${metric}: the reward of sample ${i} returned ` +
        `${value === undefined ? 'no field' : `a ${typeof value}`} '${metric}'; expected a number (or metric acc, ` +
        `score, seq_reward, seq_final_reward)`,
    );
  });
}

/** numpy's np.std (population, mean taken first), so that float rounding keeps or drops the same groups as verl. */
function numpyStd(values: readonly number[]): number {
  let sum = 0;
  for (const v of values) sum += v;
  const mean = sum / values.length;
  let squares = 0;
  for (const v of values) squares += (v - mean) ** 2;
  return Math.sqrt(squares / values.length);
}

/** The groups (prompt indices, in order of first appearance) whose metric std > 0 or that hold a single sample. */
export function keptGroups(groupIds: readonly number[], values: readonly number[]): number[] {
  const byGroup = new Map<number, number[]>();
  groupIds.forEach((g, i) => {
    if (!byGroup.has(g)) byGroup.set(g, []);
    byGroup.get(g)!.push(values[i]);
  });
  return [...byGroup].filter(([, vals]) => numpyStd(vals) > 0 || vals.length === 1).map(([g]) => g);
}

/** The samples of `groups` (in that order), with groupIds renumbered into the returned records. */
export function selectGroups<R>(batch: ScoredBatch<R>, groups: readonly number[]): ScoredBatch<R> {
  const rows = groups.flatMap((g) => batch.rollout.groupIds.flatMap((id, i) => (id === g ? [i] : [])));
  const renumber = new Map(groups.map((g, k) => [g, k]));
  const pick = <T>(list: readonly T[]) => rows.map((i) => list[i]);
  const rollout = rolloutRows(batch.rollout, rows);
  return {
    records: groups.map((g) => batch.records[g]),
    rollout: { ...rollout, groupIds: rollout.groupIds.map((g) => renumber.get(g)!) },
    scores: pick(batch.scores),
    rewardExtraInfo: pick(batch.rewardExtraInfo),
  };
}

/** Rows of a rollout re-padded to a longer prompt (left) and response (right), as the rollout pads them. */
function repad(r: RolloutBatch, P: number, R: number, padTokenId: number): RolloutBatch {
  const left = P - r.promptLength;
  const right = R - r.responseLength;
  const fill = (n: number, v: number) => new Array<number>(n).fill(v);
  const both = (rows: number[][], leftValue: number, rightValue: (row: number[]) => number[]) =>
    rows.map((row) => [...fill(left, leftValue), ...row, ...rightValue(row)]);
  return {
    ...r,
    promptLength: P,
    responseLength: R,
    prompts: r.prompts.map((p) => [...fill(left, padTokenId), ...p]),
    responses: r.responses.map((s) => [...s, ...fill(right, padTokenId)]),
    inputIds: both(r.inputIds, padTokenId, () => fill(right, padTokenId)),
    attentionMask: both(r.attentionMask, 0, () => fill(right, 0)),
    // Left padding gets position 1 (models/token-batch positionsFromMask); response positions run on past the end.
    positionIds: both(r.positionIds, 1, (row) => Array.from({ length: right }, (_, t) => row[row.length - 1] + 1 + t)),
    responseMask: r.responseMask.map((m) => [...m, ...fill(right, 0)]),
    oldLogProbs: r.oldLogProbs.map((l) => {
      const out = new Float32Array(R);
      out.set(l);
      return out;
    }),
  };
}

/**
 * verl's DataProto.concat of the kept groups of two generation batches (the second's groups numbered after the
 * first's).
 */
export function concatBatches<R>(a: ScoredBatch<R>, b: ScoredBatch<R>, padTokenId: number): ScoredBatch<R> {
  const P = Math.max(a.rollout.promptLength, b.rollout.promptLength);
  const R = Math.max(a.rollout.responseLength, b.rollout.responseLength);
  const [x, y] = [repad(a.rollout, P, R, padTokenId), repad(b.rollout, P, R, padTokenId)];
  const offset = a.records.length;
  return {
    records: [...a.records, ...b.records],
    rollout: {
      ...x,
      groupIds: [...x.groupIds, ...y.groupIds.map((g) => g + offset)],
      prompts: [...x.prompts, ...y.prompts],
      responses: [...x.responses, ...y.responses],
      inputIds: [...x.inputIds, ...y.inputIds],
      attentionMask: [...x.attentionMask, ...y.attentionMask],
      positionIds: [...x.positionIds, ...y.positionIds],
      responseMask: [...x.responseMask, ...y.responseMask],
      oldLogProbs: [...x.oldLogProbs, ...y.oldLogProbs],
      responseLengths: [...x.responseLengths, ...y.responseLengths],
      finishReasons: [...x.finishReasons, ...y.finishReasons],
    },
    scores: [...a.scores, ...b.scores],
    rewardExtraInfo: [...a.rewardExtraInfo, ...b.rewardExtraInfo],
  };
}

/** verl's error when max_num_gen_batches generation batches did not fill the training batch. */
export function tooManyGenBatchesMessage(numGenBatches: number, maxNumGenBatches: number): string {
  return (
    `num_gen_batches=${numGenBatches} >= max_num_gen_batches=${maxNumGenBatches}.` +
    ' Generated too many. Please check if your data are too difficult.' +
    ' You could also try set max_num_gen_batches=0 to enable endless trials.'
  );
}

/**
 * Draws generation batches until `trainBatchSize` prompts' groups are kept, then the first `trainBatchSize` of
 * them (verl: batch[:train_batch_size * n]); throws verl's error when max_num_gen_batches (> 0) is reached first.
 */
export async function dynamicSample<R>(
  options: { trainBatchSize: number; maxNumGenBatches: number; metric: string; padTokenId: number },
  nextBatch: () => Promise<ScoredBatch<R>>,
): Promise<{ batch: ScoredBatch<R>; numGenBatches: number }> {
  let kept: ScoredBatch<R> | null = null;
  for (let numGenBatches = 1; ; numGenBatches++) {
    const batch = await nextBatch();
    const groups = keptGroups(
      batch.rollout.groupIds,
      filterMetricValues(options.metric, batch.scores, batch.rewardExtraInfo),
    );
    const selected = selectGroups(batch, groups);
    kept = kept ? concatBatches(kept, selected, options.padTokenId) : selected;
    if (kept.records.length >= options.trainBatchSize) {
      return {
        batch: selectGroups(
          kept,
          Array.from({ length: options.trainBatchSize }, (_, g) => g),
        ),
        numGenBatches,
      };
    }
    if (options.maxNumGenBatches > 0 && numGenBatches >= options.maxNumGenBatches)
      throw new Error(tooManyGenBatchesMessage(numGenBatches, options.maxNumGenBatches));
  }
}
