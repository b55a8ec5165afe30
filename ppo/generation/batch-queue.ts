// A rollout's batch as the continuous-batching loop's queue: sample i (prompt ⌊i / n⌋) draws from the random
// stream (seed, i), so its tokens do not depend on the slot, the batch or the order it decodes in.
import type { RolloutConfig } from './types.ts';
import { NEUTRAL_PROCESSING } from '../../kernels/decode/logits-processors.ts';
import { TurnProgress, singleTurnRecords, type PromptBatch, type SampleRecord } from './sample-records.ts';
import type { QueuedSample, SampleQueue } from './continuous-batching.ts';

export class BatchQueue implements SampleQueue {
  private readonly samples: QueuedSample[];
  private readonly logprobs: Float32Array[];
  private next = 0;

  constructor(
    prompts: PromptBatch,
    private readonly c: RolloutConfig,
  ) {
    const { temperature, topK, topP, seed } = c;
    // ignore_eos: no EOS ends a response on the host, and the logits processing reopens a row the sampler ended.
    const ending = c.ignoreEos ? { ...c, eosTokenIds: [] } : c;
    const processing = c.ignoreEos ? { ...NEUTRAL_PROCESSING, ignoreEos: true } : undefined;
    this.samples = prompts.groupIds.map((_, i) => ({
      prompt: prompts.ids[i].slice(prompts.P - prompts.lengths[i]),
      sampling: { temperature, topK, topP, seed, stream: i },
      progress: new TurnProgress(ending, [], c.stopStrings ?? [], c.maxResponseLength),
      processing,
    }));
    this.logprobs = this.samples.map(() => new Float32Array(0));
  }

  get waiting(): number {
    return this.samples.length - this.next;
  }

  take(count: number): QueuedSample[] {
    const taken = this.samples.slice(this.next, this.next + count);
    this.next += taken.length;
    return taken;
  }

  finished(sample: QueuedSample, logprobs: Float32Array): void {
    this.logprobs[sample.sampling.stream] = logprobs;
  }

  onRead(): void {
    const progress = this.samples.map((s) => s.progress);
    this.c.onProgress?.({
      done: progress.filter((p) => p.done).length,
      total: progress.length,
      tokens: progress.reduce((n, p) => n + p.tokens.length, 0),
    });
  }

  /** Every sample's response, once the loop has ended. */
  records(): SampleRecord[] {
    return singleTurnRecords(
      this.samples.map((s) => s.progress),
      this.logprobs,
    );
  }
}
