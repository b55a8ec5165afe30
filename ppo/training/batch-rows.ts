// Rows of a batch picked by index, on the host (an index may repeat): a rollout's rows (DAPO's kept groups, a
// resampled batch), and the rows of an (N, R) per-response-token array (a micro-batch's, a resampled batch's).
import type { RolloutBatch } from '../generation/types.ts';

/** The rollout's samples `rows`, in that order; groupIds still index the same prompts. */
export function rolloutRows(r: RolloutBatch, rows: readonly number[]): RolloutBatch {
  const pick = <T>(list: readonly T[]) => rows.map((i) => list[i]);
  return {
    ...r,
    groupIds: pick(r.groupIds),
    prompts: pick(r.prompts),
    responses: pick(r.responses),
    inputIds: pick(r.inputIds),
    attentionMask: pick(r.attentionMask),
    positionIds: pick(r.positionIds),
    responseMask: pick(r.responseMask),
    oldLogProbs: pick(r.oldLogProbs),
    responseLengths: pick(r.responseLengths),
    finishReasons: pick(r.finishReasons),
  };
}

/** Rows `rows` of an (N, sourceR) row-major array, each cut to its first R columns. */
export function responseRows(all: Float32Array, sourceR: number, rows: readonly number[], R = sourceR): Float32Array {
  const out = new Float32Array(rows.length * R);
  rows.forEach((row, i) => out.set(all.subarray(row * sourceR, row * sourceR + R), i * R));
  return out;
}
