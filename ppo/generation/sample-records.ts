// A rollout's samples on the host: the prompts left-padded and repeated n times, each sample's response as it
// grows (generated tokens with their old log-probs, observations masked out), the rule that ends a turn (EOS,
// turn-ending token or string, budget), and the assembly of the finished samples into the PPO batch (and back).
import { positionsFromMask } from '../../models/token-batch.ts';
import type { FinishReason, RolloutBatch, RolloutConfig } from './types.ts';

/** One sample's response as it grows: generated tokens (mask 1) and observations (mask 0). */
export class SampleRecord {
  readonly tokens: number[] = [];
  readonly logprobs: number[] = [];
  readonly generated: number[] = [];
  /** Response tokens whose keys and values are in the cache. */
  cached = 0;
  reason: FinishReason | null = null;

  append(tokens: readonly number[], logprobs: ArrayLike<number> | null): void {
    tokens.forEach((token, i) => {
      this.tokens.push(token);
      this.logprobs.push(logprobs ? logprobs[i] : 0);
      this.generated.push(logprobs ? 1 : 0);
    });
  }
}

/** The host's view of one sample during one turn, and the rule that ends the turn. */
export class TurnProgress {
  readonly tokens: number[] = [];
  reason: FinishReason | null = null;

  constructor(
    private readonly config: Pick<RolloutConfig, 'eosTokenIds' | 'decode'>,
    private readonly turnEndIds: readonly number[],
    private readonly stopStrings: readonly string[],
    readonly budget: number,
  ) {}

  get done(): boolean {
    return this.reason !== null;
  }

  /** Appends generated tokens until one ends the turn. */
  async take(tokens: ArrayLike<number>): Promise<void> {
    const { eosTokenIds, decode } = this.config;
    for (let i = 0; i < tokens.length && !this.done; i++) {
      this.tokens.push(tokens[i]);
      if (eosTokenIds.includes(tokens[i])) this.reason = 'eos';
      else if (this.turnEndIds.includes(tokens[i])) this.reason = 'stop';
      else if (this.stopStrings.length && (await this.endsOnStopString(decode!))) this.reason = 'stop';
      else if (this.tokens.length === this.budget) this.reason = 'length';
    }
  }

  private async endsOnStopString(decode: NonNullable<RolloutConfig['decode']>): Promise<boolean> {
    const text = await decode(this.tokens);
    return this.stopStrings.some((s) => text.includes(s));
  }
}

export type PromptBatch = ReturnType<typeof promptBatch>;

/** Left-pads the prompts, each repeated n times. */
export function promptBatch(prompts: readonly (readonly number[])[], c: RolloutConfig) {
  const P = Math.max(...prompts.map((p) => p.length));
  const groupIds = prompts.flatMap((_, g) => new Array<number>(c.n).fill(g));
  const ids = groupIds.map((g) => [...new Array<number>(P - prompts[g].length).fill(c.padTokenId), ...prompts[g]]);
  const mask = groupIds.map((g) => Array.from({ length: P }, (_, t) => (t >= P - prompts[g].length ? 1 : 0)));
  return { P, groupIds, ids, mask, lengths: groupIds.map((g) => prompts[g].length) };
}

/** Each sample's one-turn response and the log-probs of its tokens. */
export function singleTurnRecords(
  progress: readonly TurnProgress[],
  logprobs: readonly Float32Array[],
): SampleRecord[] {
  return progress.map((p, i) => {
    const record = new SampleRecord();
    record.append(p.tokens, logprobs[i]);
    record.reason = p.reason;
    return record;
  });
}

/** What assemble() reads of a sample: its response (observations included) and the log-probs of its tokens. */
export type AssembledSample = Pick<SampleRecord, 'tokens' | 'logprobs' | 'generated' | 'reason'>;

/** The PPO batch from the prompts and every sample's final response. */
export function assemble(prompts: PromptBatch, records: readonly AssembledSample[], c: RolloutConfig): RolloutBatch {
  const R = c.maxResponseLength;
  const pad = (row: readonly number[], value: number) => [...row, ...new Array<number>(R - row.length).fill(value)];
  const responses = records.map((s) => pad(s.tokens, c.padTokenId));
  return {
    groupIds: prompts.groupIds,
    promptLength: prompts.P,
    responseLength: R,
    prompts: prompts.ids,
    responses,
    inputIds: prompts.ids.map((p, i) => [...p, ...responses[i]]),
    attentionMask: prompts.mask.map((m, i) => [
      ...m,
      ...pad(
        records[i].tokens.map(() => 1),
        0,
      ),
    ]),
    positionIds: prompts.mask.map((m, i) => [
      ...positionsFromMask(m),
      ...Array.from({ length: R }, (_, t) => prompts.lengths[i] + t),
    ]),
    responseMask: records.map((s) => pad(s.generated, 0)),
    oldLogProbs: records.map((s) => Float32Array.from(pad(s.logprobs, 0))),
    responseLengths: records.map((s) => s.tokens.length),
    finishReasons: records.map((s) => s.reason ?? 'length'),
  };
}

/** The samples assemble() took, read back from its batch: a batch kept outside the process (an async run's checkpoint)
 *  stores these and is assembled again from its prompts, instead of its padded (N, P + R) rows. */
export function disassemble(batch: RolloutBatch): AssembledSample[] {
  return batch.responses.map((row, i) => {
    const length = batch.responseLengths[i];
    return {
      tokens: row.slice(0, length),
      logprobs: Array.from(batch.oldLogProbs[i].subarray(0, length)),
      generated: batch.responseMask[i].slice(0, length),
      reason: batch.finishReasons[i],
    };
  });
}
