// verl's rollout and validation dumps (trainer.rollout_data_dir, trainer.validation_data_dir), as
// RayPPOTrainer._dump_generations writes them: per sample its prompt and response texts, the ground truth (`gts`,
// the row's reward_model.ground_truth or null), its score and the step, then each of the reward's extra fields
// that every sample of the batch has (a field some samples lack is left out, as verl drops a column shorter than
// the batch; a field named `score` replaces the score, as in verl).

/** One line of a dump. */
export type GenerationRecord = { input: string; output: string; gts: unknown; score: number; step: number } & Record<
  string,
  unknown
>;

/** What a dump knows of one sample. */
export interface GeneratedSample {
  input: string;
  output: string;
  gts: unknown;
  score: number;
  /** What the reward function returned beside its number (a dict's entries), or null. */
  rewardExtraInfo: Readonly<Record<string, unknown>> | null;
}

/** Where a step's (`rollout`) and a validation's samples go; null: not dumped. */
export interface GenerationDumps {
  rollout: ((step: number, records: GenerationRecord[]) => Promise<void>) | null;
  validation: ((step: number, records: GenerationRecord[]) => Promise<void>) | null;
}

/** The dump's lines; `columns` come before the reward's extra fields (validation's `reward`, as verl's _validate). */
export function generationRecords(
  step: number,
  samples: readonly GeneratedSample[],
  columns: Record<string, readonly unknown[]> = {},
): GenerationRecord[] {
  const extra = new Map<string, unknown[]>(Object.entries(columns).map(([key, values]) => [key, [...values]]));
  const keys = new Set(samples.flatMap((s) => Object.keys(s.rewardExtraInfo ?? {})));
  for (const key of keys) {
    if (samples.every((s) => s.rewardExtraInfo !== null && key in s.rewardExtraInfo))
      extra.set(
        key,
        samples.map((s) => s.rewardExtraInfo![key]),
      );
  }
  return samples.map((s, i) => {
    const record: GenerationRecord = { input: s.input, output: s.output, gts: s.gts ?? null, score: s.score, step };
    for (const [key, values] of extra) record[key] = values[i] ?? null;
    return record;
  });
}
