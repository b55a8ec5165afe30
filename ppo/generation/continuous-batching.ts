// Continuous batching of single-turn samples, as in vLLM: up to a fixed number of slots (rows) decode together, and a
// finished sample's slot takes the next waiting one (prefilled on its own, then joined to the decode batch), so
// no slot waits for the slowest sample of a chunk. The samples come from a queue: a rollout's fixed batch, or a
// server's requests as they arrive, so samples of different requests share the batch, each with its own random
// stream and sampling parameters. The batch holds only rows with samples, up to `slots`: once none waits, finished
// rows can be dropped (compaction), and samples that arrive later join as new rows. The host reads the sampled ids
// and their log-probs (to end samples, apply stop strings and refill slots) every `readEvery` steps, one chunk
// behind the GPU (a rollout: its samples all wait from the start), or, for a server, after every step, acting on
// each read as soon as it has arrived, so that a client's next request finds its row within a few steps.
import { Tensor } from '../../engine/index.ts';
import { logitsWindowSpans } from '../../models/incremental-decoder.ts';
import { positionsFromMask } from '../../models/token-batch.ts';
import { sampleTokens, type RowSampling } from '../../kernels/decode/sample.ts';
import { topLogprobs } from '../../kernels/decode/top-logprobs.ts';
import { isNeutralProcessing, processLogits, type RowProcessing } from '../../kernels/decode/logits-processors.ts';
import { DEFAULT_READ_EVERY } from './types.ts';
import type { TurnProgress } from './sample-records.ts';
import { SamplerState } from './sampler-state.ts';
import type { RolloutDecoders } from './decoders.ts';
import { PromptScoring, type PromptScores, type ScoreOptions } from './prompt-scoring.ts';

const DEFAULT_COMPACT_BELOW = 0.5;
/** Decode steps between two slot shifts of the continuous cache, at least (a shift copies the whole cache). */
const MIN_SHIFT_INTERVAL = 64;

/** The decode cache's slots for prompts of width P and responses of R tokens. */
export function continuousCacheCapacity(P: number, R: number, readEvery: number): number {
  // A sample's cache window: its prompt, R tokens, and up to 2·readEvery steps before the host sees it
  // end (reads lag one chunk); past that, room to decode between two shifts.
  const window = P + R + 2 * readEvery + 1;
  return window + Math.max(MIN_SHIFT_INTERVAL, Math.ceil(window / 4));
}

/** A sample for a slot: its prompt (at most the loop's P tokens), its sampling and the rule that ends it. */
export interface QueuedSample {
  prompt: readonly number[];
  /** Its random stream and parameters; the loop picks the output row. */
  sampling: Omit<RowSampling, 'outRow'>;
  /** Its response so far; its budget is at most the loop's R. */
  progress: TurnProgress;
  /**
   * Set when nobody waits for it any more (a server's client went away): the loop ends it at the next decode step,
   * before its budget, and its row is free for the next waiting sample at the next read (a server's: at that step).
   */
  cancelled?: boolean;
  /** Most likely tokens to report per generated token, with their log-probs (a server's top log-probs); 0: none. */
  topLogprobs?: number;
  /** Its logits processing (a server's penalties, bias, ignore_eos, ...); absent: none. */
  processing?: RowProcessing;
  /** Filled by the loop when topLogprobs > 0: per generated token, its alternatives. */
  top?: TopAlternatives[];
  /** Told the tokens each read adds to its response and their log-probs (a server streams them). */
  onTokens?(tokens: readonly number[], logprobs: readonly number[], top: readonly TopAlternatives[]): void;
  /**
   * Its prompt's log-probs, wanted from its own prefill (a server's request that scores its prompt and generates):
   * it is prefilled alone, keeping every position's logits for the prompt-logprobs kernel, and `scored` is told the
   * scores once the prefill is recorded.
   */
  scorePrompt?: { K: number; options: ScoreOptions; scored(scores: Promise<PromptScores>): void };
}

/** One generated position's most likely tokens, most likely first, and their log-probs. */
export interface TopAlternatives {
  ids: number[];
  logprobs: number[];
}

/** The sample needs no more tokens: its response ended, or it was cancelled. */
const ended = (q: QueuedSample): boolean => q.progress.done || q.cancelled === true;

/** Where the samples come from, and where they go once their response has ended. */
export interface SampleQueue {
  /** Samples waiting for a slot now. */
  readonly waiting: number;
  /** Removes and returns up to `count` waiting samples, in order. */
  take(count: number): QueuedSample[];
  /** A sample's response has ended (progress.reason set) or the loop ended it: its tokens and their log-probs. */
  finished(sample: QueuedSample, logprobs: Float32Array): void;
  /** Told each time the host has read sampled ids (progress lines). */
  onRead?(): void;
}

export interface ContinuousOptions {
  /** Longest prompt the queue may hand out; the shared cache index starts past it. */
  P: number;
  /** Longest response: the output rows' width. */
  R: number;
  eosTokenIds: readonly number[];
  padTokenId: number;
  readEvery?: number;
  /**
   * Drop finished rows once at most this fraction of the batch is still generating and none is waiting (0: never;
   * 1: whenever a row is free); samples that arrive later join as new rows, up to the loop's slots.
   */
  compactBelow?: number;
  /** Told the rows of each decode step (the steps after the prefills), e.g. to count decode row-steps. */
  onDecodeStep?(rows: number): void;
  /** Told the rows of each prefill (a group of waiting samples admitted together), e.g. to count prefill groups. */
  onPrefill?(rows: number): void;
  /** Alternatives computed per column for samples that ask for top log-probs, at most (0: none, the default). */
  topLogprobs?: number;
  /** Samples may carry logits processing (a server's); without it the loop never runs the processing kernel. */
  processing?: boolean;
  /**
   * A server's: read the output rows after every decode step instead of every readEvery steps, and act on each read
   * once it has arrived, at most `lag` steps later, awaiting `between()` at every step meanwhile (the event loop
   * turns: requests arrive, responses leave, the read completes). An ended sample's row then takes a waiting one
   * within 2·lag steps, a sample that arrives joins at the next step, and once a row has been empty for
   * `emptyRowSteps` steps with none waiting, every empty row is dropped. Absent: the rollout's cadence, whose samples
   * all wait from the start. `gather`: steps a waiting sample may wait for others while rows run, so that samples
   * arriving a few steps apart are prefilled as one group (each prefill is a forward pass of its own: many small
   * groups cost more host and device time than one) and, with equal budgets, end together and are refilled
   * together; a sample is admitted at once when nothing else runs or when the samples waiting fill every free row
   * (0 or absent: at once).
   */
  eager?: { lag: number; gather?: number; emptyRowSteps: number; between(): Promise<void> };
}

/** The output rows as the host read them. */
interface HostRead {
  tokens: Uint32Array;
  logprobs: Float32Array;
  top: { ids: Uint32Array; logprobs: Float32Array } | null;
}

/** A read of the output rows after `dispatches` sampler dispatches, the samples it holds, and whether it arrived. */
interface PendingRead {
  dispatches: number;
  samples: SlotSample[];
  read: Promise<HostRead>;
  arrived: boolean;
}

/** A sample decoding in a slot of the continuous batch. */
interface SlotSample {
  queued: QueuedSample;
  outRow: number;
  /** Sampler dispatches before its first token: its column t comes from dispatch firstDispatch + t + 1. */
  firstDispatch: number;
  /** Columns read so far, and their log-probs. */
  harvested: number;
  logprobs: number[];
  /** Its first cache slot (its prompt's, padding included); earlier slots are masked for it. */
  windowStart: number;
}

/**
 * Continuous batching until the queue is empty and every sample taken has ended: up to `slots` rows decode
 * together in one cache whose slot index they share; a row whose sample ended takes the next waiting sample,
 * prefilled in a cache of its own and imported so that its prompt ends at the shared index, and samples for
 * which no row is free join as new rows while the batch has fewer than `slots`. When the index reaches the
 * capacity, every row's slots shift left past the oldest live sample's first slot.
 */
export async function decodeContinuous(
  decoders: RolloutDecoders,
  queue: SampleQueue,
  c: ContinuousOptions,
  slots: number,
  capacity: number,
): Promise<void> {
  const e = decoders.engine;
  const V = decoders.policy.config.vocabSize;
  const { P, R } = c;
  const readEvery = c.readEvery ?? DEFAULT_READ_EVERY;
  const compactBelow = c.compactBelow ?? DEFAULT_COMPACT_BELOW;
  const eager = c.eager;
  // Rows join the decode batch prefilled: its calls are decode steps, of one token.
  const decoder = decoders.decoderFor('decode', slots, capacity, 1);
  const prefill = decoders.decoderFor('prefill', slots, P, P);
  // Buffers for `slots` rows, and one output row per row, kept by the row through compactions: a finished row
  // goes on writing padding into its own output row (past its last token) until its next sample restarts it, so
  // no other row may use that output row; a dropped row's output row is free for a row added later. The host has
  // read the last sample's columns before the next one is admitted.
  const processing = c.processing ? { promptWidth: P } : null;
  const state = new SamplerState(e, slots, slots, R, c.eosTokenIds, c.topLogprobs ?? 0, processing);
  const top = state.top;
  let outRows: number[] = [];
  let rows: (SlotSample | null)[] = [];
  /** Per row, the dispatch after which it was left empty (meaningful where rows[r] is null). */
  let emptySince: number[] = [];
  let dispatches = 0;
  /** A server's: the dispatch since which samples have waited with a row free (null: none waits). */
  let waitingSince: number | null = null;

  /** Appends `count` empty rows to the batch, each with an output row no row of the batch uses; returns them. */
  const addRows = (count: number): number[] => {
    const used = new Set(outRows);
    const added = Array.from({ length: count }, (_, k) => rows.length + k);
    outRows = [
      ...outRows,
      ...Array.from({ length: slots }, (_, o) => o)
        .filter((o) => !used.has(o))
        .slice(0, count),
    ];
    rows = [...rows, ...added.map(() => null)];
    emptySince = [...emptySince, ...added.map(() => dispatches)];
    return added;
  };
  /** Drops the rows not listed (ascending) from the batch: the ones left move to the front. */
  const keepRows = (keep: number[]): void => {
    decoder.keepRows(keep);
    state.keepRows(keep);
    rows = keep.map((r) => rows[r]);
    outRows = keep.map((r) => outRows[r]);
    emptySince = keep.map((r) => emptySince[r]);
  };
  /** The first admission's logits where its samples were prefilled in several groups (a server's scoring samples). */
  let admitted: Tensor | null = null;
  /** Prefills samples into the rows `taken`; returns their (k, V) logits. */
  const prefillGroup = (samples: readonly QueuedSample[], taken: readonly number[]): Tensor => {
    const width = Math.max(...samples.map((s) => s.prompt.length));
    const masks = samples.map((s) => Array.from({ length: width }, (_, t) => (t >= width - s.prompt.length ? 1 : 0)));
    prefill.reset(taken.length);
    c.onPrefill?.(taken.length);
    const score = samples.length === 1 ? samples[0].scorePrompt : undefined;
    let logits: Tensor;
    if (score) {
      const scoring = new PromptScoring(e, V, samples[0].prompt, score.K, score.options);
      logits = decoders.feedScored(prefill, samples[0].prompt, scoring);
      score.scored(scoring.result());
    } else {
      logits = decoders.feedBlock(
        prefill,
        samples.map((s) => [...new Array<number>(width - s.prompt.length).fill(c.padTokenId), ...s.prompt]),
        masks,
        masks.map((m) => positionsFromMask(m)),
      );
    }
    decoder.cache.importRows(
      prefill.cache,
      taken.map((to, from) => ({ from, to })),
    );
    taken.forEach((r, k) => {
      rows[r] = {
        queued: samples[k],
        outRow: outRows[r],
        firstDispatch: dispatches,
        harvested: 0,
        logprobs: [],
        windowStart: decoder.cache.length - width,
      };
    });
    // One startRows per run of consecutive rows (the usual case: rows free up and are taken in order): each call
    // uploads 4-5 per-row tensors.
    for (let k = 0, end = 1; k < taken.length; k = end, end = k + 1) {
      while (end < taken.length && taken[end] === taken[end - 1] + 1) end++;
      state.startRows(
        taken[k],
        samples.slice(k, end).map((s, j) => ({
          sampling: { ...s.sampling, outRow: outRows[taken[k + j]] },
          position: s.prompt.length - 1,
          processing: s.processing,
          prompt: s.prompt,
        })),
      );
    }
    return logits;
  };
  /**
   * Prefills samples into the listed rows (ascending, at least as many): their first logits go to those rows of
   * `into` (a decode step's logits), or without it are returned, row k for the k-th sample's row. Samples that score
   * their prompt are prefilled one at a time, the others together.
   */
  const admit = (samples: readonly QueuedSample[], free: readonly number[], into: Tensor | null): Tensor => {
    const taken = free.slice(0, samples.length);
    const plain = samples.flatMap((s, k) => (s.scorePrompt ? [] : [k]));
    const groups = [...(plain.length > 0 ? [plain] : []), ...samples.flatMap((s, k) => (s.scorePrompt ? [[k]] : []))];
    if (groups.length === 1 && !into) return prefillGroup(samples, taken);
    // In windows of rows that each fit one binding, as a decode step's logits (models/incremental-decoder.ts).
    admitted ??= into
      ? null
      : Tensor.split(
          'rollout.admittedLogits',
          [slots, V],
          logitsWindowSpans(slots, V, e.maxBindingBytes).map(([first, n]) =>
            e.tensor(`rollout.admittedLogits.rows${first}`, [n * V]),
          ),
        );
    const target = into ?? admitted!;
    for (const group of groups) {
      const logits = prefillGroup(
        group.map((k) => samples[k]),
        group.map((k) => taken[k]),
      );
      group.forEach((k, j) =>
        e.copy(
          logits.view(`${logits.name}[${j}]`, j * V, [V]),
          target.view(`${target.name}[${taken[k]}]`, taken[k] * V, [V]),
        ),
      );
    }
    return target.slice(target.name, 0, samples.length * V, [samples.length, V]);
  };
  const release = (r: number): void => {
    const s = rows[r]!;
    queue.finished(s.queued, Float32Array.from(s.logprobs.slice(0, s.queued.progress.tokens.length)));
    state.finish(r);
    rows[r] = null;
    emptySince[r] = dispatches;
  };
  const wantsTop = (s: SlotSample | null) => (s?.queued.topLogprobs ?? 0) > 0;
  const processes = (s: SlotSample | null) =>
    s?.queued.processing !== undefined && !isNeutralProcessing(s.queued.processing);
  /** Takes columns [s.harvested, to) of a sample's output row from the host copies. */
  const takeColumns = async (s: SlotSample, read: HostRead, to: number): Promise<void> => {
    const p = s.queued.progress;
    if (ended(s.queued) || to <= s.harvested) return;
    const before = p.tokens.length;
    await p.take(read.tokens.subarray(s.outRow * R + s.harvested, s.outRow * R + to));
    for (let t = s.harvested; t < to; t++) s.logprobs.push(read.logprobs[s.outRow * R + t]);
    const added: TopAlternatives[] = [];
    if (wantsTop(s) && top && read.top) {
      const n = s.queued.topLogprobs!;
      for (let t = before; t < p.tokens.length; t++) {
        const at = (s.outRow * R + t) * top.K;
        added.push({
          ids: Array.from(read.top.ids.subarray(at, at + n)),
          logprobs: Array.from(read.top.logprobs.subarray(at, at + n)),
        });
      }
      (s.queued.top ??= []).push(...added);
    }
    s.harvested = to;
    s.queued.onTokens?.(p.tokens.slice(before), s.logprobs.slice(before, p.tokens.length), added);
  };
  /**
   * Reads the output rows (and the alternatives, when a sample of `samples` wants them) as one read-back, without
   * waiting; `awaitedLater`: the loop records the next step before it awaits them.
   */
  const readOutputs = async (samples: readonly SlotSample[], awaitedLater: boolean): Promise<HostRead> => {
    const alternatives = top && samples.some(wantsTop) ? [top.ids, top.logprobs] : [];
    const [tokens, logprobs, ids, topLogprobs] = await e.readAll([state.tokens, state.logprobs, ...alternatives], {
      awaitedLater,
    });
    return {
      tokens: tokens as Uint32Array,
      logprobs: logprobs as Float32Array,
      top: ids ? { ids: ids as Uint32Array, logprobs: topLogprobs as Float32Array } : null,
    };
  };

  // The read in flight (startRead assigns it from a closure: the annotation keeps TypeScript from narrowing to null).
  let pending = null as PendingRead | null;
  const startRead = (samples: SlotSample[]): void => {
    const read: PendingRead = { dispatches, samples, read: readOutputs(samples, true), arrived: false };
    // A failed read fails at harvest, which awaits it.
    read.read.then(
      () => {
        read.arrived = true;
      },
      () => {},
    );
    pending = read;
  };
  const harvest = async (): Promise<void> => {
    if (!pending) return;
    const { dispatches: through, samples, read } = pending;
    pending = null;
    const host = await read;
    for (const s of samples) await takeColumns(s, host, Math.min(R, through - s.firstDispatch));
  };
  const firstSamples = queue.take(slots);
  if (firstSamples.length === 0) {
    state.destroy();
    return;
  }
  // One row per sample; the shared index starts past the longest prompt, so any prompt can end there.
  decoder.cache.reset(firstSamples.length, P);
  // Their prompts' logits are the first step's.
  let logits = admit(firstSamples, addRows(firstSamples.length), null);
  let logitRows = firstSamples.length;
  for (;;) {
    if (state.rowProcessing && rows.some(processes)) {
      // Before the alternatives and the sampler: both read the processed logits (vLLM's processed log-probs).
      const v = state.view(logitRows);
      processLogits(e, {
        logits,
        V,
        rows: logitRows,
        rowProcessing: state.rowProcessing,
        rowSampling: v.sampling.rowSampling,
        tokens: state.tokens,
        steps: v.steps,
        finished: v.finished,
        eosIds: v.sampling.eosTensor,
        numEos: v.sampling.eosIds.length,
        outStride: R,
        prompts: state.rowPrompts!.ids,
        promptStride: state.rowPrompts!.width,
      });
    }
    if (top && rows.some(wantsTop)) {
      // Before the sampler, on the same logits: its alternatives go to the column the sampler fills.
      const v = state.view(logitRows);
      topLogprobs(e, {
        logits,
        V,
        rows: logitRows,
        ...v,
        rowSampling: v.sampling.rowSampling,
        topIds: top.ids,
        topLogprobs: top.logprobs,
        outStride: R,
        K: top.K,
      });
    }
    sampleTokens(e, {
      logits,
      V,
      rows: logitRows,
      ...state.view(logitRows),
      tokens: state.tokens,
      logprobs: state.logprobs,
      outStride: R,
      padId: c.padTokenId,
    });
    dispatches++;
    // A cancelled sample leaves now: its row stops sampling (the kernel pads a finished row) and is free at the read.
    rows.forEach((s, r) => {
      if (s?.queued.cancelled) release(r);
    });
    const live = rows.filter((s): s is SlotSample => s !== null && !ended(s.queued));
    // Once every live sample has drawn its budget and none waits, stop without the reads' lag (up to
    // 2·readEvery steps of decoding whose tokens nobody keeps).
    if (queue.waiting === 0 && live.every((s) => dispatches >= s.firstDispatch + s.queued.progress.budget)) break;
    let free: number[] = [];
    let arrived: QueuedSample[] = [];
    // The rollout acts on the previous chunk's read, which has arrived meanwhile; a server on the last read as soon
    // as it has arrived.
    const readNow = eager
      ? pending === null || pending.arrived || dispatches - pending.dispatches >= eager.lag
      : dispatches % readEvery === 0;
    if (readNow) {
      await harvest();
      queue.onRead?.();
      const running = rows.filter((s): s is SlotSample => s !== null && !ended(s.queued));
      if (running.length === 0 && queue.waiting === 0) break;
      // Read these tokens without waiting.
      if (running.length > 0) startRead(running);
      rows.forEach((s, r) => {
        if (s && ended(s.queued)) release(r);
      });
      if (!eager && queue.waiting === 0 && running.length < rows.length && running.length <= compactBelow * rows.length)
        keepRows(rows.flatMap((s, r) => (s ? [r] : [])));
    }
    // A server keeps an empty row for emptyRowSteps steps (a client's next request usually comes sooner); once one
    // has waited that long, every empty row goes in the same compaction (each moves every later row's cache: rows
    // that end a step apart would otherwise cost one each), and a request that comes later joins as a new row.
    if (eager && queue.waiting === 0 && rows.some((s, r) => !s && dispatches - emptySince[r] >= eager.emptyRowSteps))
      keepRows(rows.flatMap((s, r) => (s ? [r] : [])));
    if (readNow || eager) {
      free = rows.flatMap((s, r) => (s ? [] : [r]));
      const room = free.length + slots - rows.length;
      if (eager && queue.waiting > 0 && room > 0) waitingSince ??= dispatches;
      // A server gathers arrivals for up to `gather` steps while other rows run and the waiting leave rows free.
      const gathering =
        eager !== undefined &&
        waitingSince !== null &&
        dispatches - waitingSince < (eager.gather ?? 0) &&
        queue.waiting < room &&
        rows.some((s) => s !== null && !ended(s.queued));
      // Waiting samples take the free rows, then new rows up to `slots`.
      arrived = gathering ? [] : queue.take(room);
      // Samples left waiting have waited already: they take the next free row at once.
      if (queue.waiting === 0) waitingSince = null;
      if (arrived.length > free.length) {
        decoder.addRows(arrived.length - free.length);
        free.push(...addRows(arrived.length - free.length));
      }
    }
    const cache = decoder.cache;
    if (cache.length === cache.capacity) {
      // Keep the longest prompt's width below the index: a newcomer's prompt ends there.
      const by = Math.min(cache.length - P, ...rows.flatMap((s) => (s ? [s.windowStart] : [])));
      cache.shiftSlots(by);
      for (const s of rows) if (s) s.windowStart -= by;
    }
    const next = state.view(rows.length);
    logits = decoder.extend({ ids: next.ids, positions: next.positions, T: 1, mask: null });
    logitRows = rows.length;
    c.onDecodeStep?.(rows.length);
    // Newcomers sample their first token from their prompt's logits, the others from this step's.
    if (arrived.length > 0) admit(arrived, free, logits);
    e.flush();
    if (eager) await eager.between();
  }
  await harvest();
  const last = await readOutputs(
    rows.filter((s): s is SlotSample => s !== null),
    false,
  );
  for (const [r, s] of rows.entries()) {
    if (!s) continue;
    await takeColumns(s, last, Math.min(R, dispatches - s.firstDispatch));
    release(r);
  }
  state.destroy();
  if (admitted) e.destroyTensor(admitted);
}
