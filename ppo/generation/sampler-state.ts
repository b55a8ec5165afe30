// The sampler's GPU state: per decode row its last token, position, step, finished flag and sampling (random
// stream, output row, parameters), and the (outRows, R) tokens and old log-probs it writes. Sampling writes each
// step's token straight into the next step's input; a sample's random stream is keyed by (seed, stream, step),
// never by its row.
import type { Engine, Tensor } from '../../engine/index.ts';
import { keepTensorRows } from '../../models/kv-cache.ts';
import {
  createSamplingTable,
  ROW_SAMPLING_WORDS,
  packRowSampling,
  type RowSampling,
  type SamplingTable,
} from '../../kernels/decode/sample.ts';
import {
  NEUTRAL_PROCESSING,
  ROW_PROCESSING_WORDS,
  packRowProcessing,
  type RowProcessing,
} from '../../kernels/decode/logits-processors.ts';

/** GPU state of the sampler for `rows` rows writing the (samples, R) outputs. */
export class SamplerState {
  readonly ids: Tensor<'u32'>;
  readonly positions: Tensor<'i32'>;
  readonly steps: Tensor<'u32'>;
  readonly finished: Tensor<'u32'>;
  readonly rowSampling: Tensor<'u32'>;
  readonly tokens: Tensor<'u32'>;
  readonly logprobs: Tensor<'f32'>;
  /** The ids that finish a row on the GPU (the EOS ids and an environment's turn-ending ids) and rowSampling. */
  readonly sampling: SamplingTable;
  /** (outRows, R, topK) each column's most likely tokens and their log-probs, when a server asks for them. */
  readonly top: { ids: Tensor<'u32'>; logprobs: Tensor<'f32'>; K: number } | null;
  /** (rows, ROW_PROCESSING_WORDS) each row's logits processing, when a server may ask for it. */
  readonly rowProcessing: Tensor<'u32'> | null;
  /** (rows, promptWidth) each row's prompt ids, for the repetition penalty (uploaded only for rows that have one). */
  readonly rowPrompts: { ids: Tensor<'u32'>; width: number } | null;
  private readonly scratch: Tensor;

  constructor(
    private readonly engine: Engine,
    readonly rows: number,
    outRows: number,
    readonly R: number,
    eosTokenIds: readonly number[],
    /** Alternatives kept per column (0: none, as the trainer's rollout, which pays nothing for them). */
    topK = 0,
    /**
     * Per-row logits processing (penalties, bias, ...) for prompts of up to promptWidth tokens: a server's; the
     * trainer's rollout has none.
     */
    processing: { promptWidth: number } | null = null,
  ) {
    this.rowProcessing = processing
      ? engine.tensor('rollout.rowProcessing', [rows * ROW_PROCESSING_WORDS], 'u32')
      : null;
    this.rowPrompts = processing
      ? {
          ids: engine.tensor('rollout.rowPrompts', [rows * processing.promptWidth], 'u32'),
          width: processing.promptWidth,
        }
      : null;
    this.top =
      topK > 0
        ? {
            ids: engine.tensor('rollout.topIds', [outRows, R, topK], 'u32'),
            logprobs: engine.tensor('rollout.topLogprobs', [outRows, R, topK]),
            K: topK,
          }
        : null;
    this.ids = engine.tensor('rollout.ids', [rows], 'u32');
    this.positions = engine.tensor('rollout.positions', [rows], 'i32');
    this.steps = engine.tensor('rollout.steps', [rows], 'u32');
    this.finished = engine.tensor('rollout.finished', [rows], 'u32');
    this.sampling = createSamplingTable(engine, 'rollout.sampling', rows, eosTokenIds);
    this.rowSampling = this.sampling.rowSampling;
    this.tokens = engine.tensor('rollout.tokens', [outRows, R], 'u32');
    this.logprobs = engine.tensor('rollout.logprobs', [outRows, R]);
    const widest = processing ? Math.max(ROW_PROCESSING_WORDS, processing.promptWidth) : ROW_SAMPLING_WORDS;
    this.scratch = engine.tensor('rollout.compaction', [rows * widest]);
  }

  private get perRow(): [Tensor, number][] {
    return [
      [this.ids, 1],
      [this.positions, 1],
      [this.steps, 1],
      [this.finished, 1],
      [this.rowSampling, ROW_SAMPLING_WORDS],
      ...(this.rowProcessing ? [[this.rowProcessing, ROW_PROCESSING_WORDS] as [Tensor, number]] : []),
      ...(this.rowPrompts ? [[this.rowPrompts.ids, this.rowPrompts.width] as [Tensor, number]] : []),
    ];
  }

  /** The per-row tensors restricted to the first `rows` rows. */
  view(rows: number) {
    const view = <T extends Tensor>(t: T) => (rows === this.rows ? t : (t.view(t.name, 0, [rows]) as T));
    return {
      ids: view(this.ids),
      positions: view(this.positions),
      steps: view(this.steps),
      finished: view(this.finished),
      sampling: this.sampling,
    };
  }

  /**
   * Starts rows [first, first + values.length) afresh: its sampling, position of its last token so far, step 0, and
   * its processing with its prompt (the repetition penalty reads it).
   */
  startRows(
    first: number,
    values: readonly {
      sampling: RowSampling;
      position: number;
      processing?: RowProcessing;
      prompt?: readonly number[];
    }[],
  ): void {
    const range = <T extends Tensor>(t: T, width = 1) =>
      first === 0 && values.length === this.rows
        ? t
        : (t.view(`${t.name}[${first}:]`, first * width, [values.length * width]) as T);
    this.engine.upload(
      range(this.rowSampling, ROW_SAMPLING_WORDS),
      values.flatMap((v) => packRowSampling(v.sampling)),
    );
    if (this.rowProcessing && this.rowPrompts) {
      const { ids, width } = this.rowPrompts;
      this.engine.upload(
        range(this.rowProcessing, ROW_PROCESSING_WORDS),
        values.flatMap((v) => packRowProcessing(v.processing ?? NEUTRAL_PROCESSING, v.prompt?.length ?? 0)),
      );
      values.forEach((v, k) => {
        if ((v.processing?.repetitionPenalty ?? 1) === 1 || !v.prompt) return;
        if (v.prompt.length > width)
          throw new Error(`SamplerState.startRows: a prompt of ${v.prompt.length} tokens, wider than ${width}`);
        const r = first + k;
        this.engine.upload(ids.view(`${ids.name}[${r}]`, r * width, [v.prompt.length]), v.prompt);
      });
    }
    this.engine.upload(
      range(this.positions),
      values.map((v) => v.position),
    );
    this.engine.upload(
      range(this.steps),
      values.map(() => 0),
    );
    this.engine.upload(
      range(this.finished),
      values.map(() => 0),
    );
  }

  /**
   * Sets row r's finished flag: the host ended it (a stop string, its budget) or it waits for nothing. 2, not the
   * sampler's 1 for an EOS, which an ignore_eos row's logits processing reopens (kernels/decode/logits-processors).
   */
  finish(r: number): void {
    this.engine.upload(this.finished.view(`${this.finished.name}[${r}]`, r, [1]), [2]);
  }

  keepRows(keep: readonly number[]): void {
    for (const [t, width] of this.perRow) keepTensorRows(this.engine, t, width, keep, this.scratch);
  }

  destroy(): void {
    const top = this.top ? [this.top.ids, this.top.logprobs] : [];
    const perRow = this.perRow.map(([t]) => t).filter((t) => t !== this.rowSampling);
    for (const t of [...perRow, this.sampling.table, this.tokens, this.logprobs, this.scratch, ...top])
      this.engine.destroyTensor(t);
  }
}
