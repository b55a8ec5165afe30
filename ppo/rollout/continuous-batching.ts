// Continuous batching of single-turn samples, as in vLLM: a fixed number of slots (rows) decode together, and a
// finished sample's slot takes the next waiting one (prefilled on its own, then joined to the decode batch), so
// no slot waits for the slowest sample of a chunk. The host reads the sampled ids every `readEvery` steps (to
// end samples, apply stop strings and refill slots), one chunk behind the GPU.
import type { Tensor } from '../../engine/index.ts';
import { positionsFromMask } from '../../models/token-batch.ts';
import { sampleTokens } from '../../kernels/decode/sample.ts';
import { DEFAULT_READ_EVERY, type RolloutConfig } from './types.ts';
import { SampleRecord, TurnProgress, singleTurnRecords, type PromptBatch } from './sample-records.ts';
import { SamplerState } from './sampler-state.ts';
import type { RolloutDecoders } from './decoders.ts';

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

/** A sample decoding in a slot of the continuous batch. */
interface SlotSample {
  sample: number;
  progress: TurnProgress;
  /** Its first cache slot (its prompt's, padding included); earlier slots are masked for it. */
  windowStart: number;
}

/**
 * Continuous batching: `slots` rows decode together in one cache whose slot index they share; a row whose
 * sample ended takes the next waiting sample, prefilled in a cache of its own and imported so that its
 * prompt ends at the shared index. When the index reaches the capacity, every row's slots shift left past
 * the oldest live sample's first slot.
 */
export async function decodeContinuous(decoders: RolloutDecoders, prompts: PromptBatch, c: RolloutConfig, slots: number, capacity: number): Promise<SampleRecord[]> {
  const e = decoders.engine;
  const N = prompts.groupIds.length;
  const R = c.maxResponseLength;
  const readEvery = c.readEvery ?? DEFAULT_READ_EVERY;
  const compactBelow = c.compactBelow ?? DEFAULT_COMPACT_BELOW;
  const decoder = decoders.decoderFor('decode', slots, capacity);
  const prefill = decoders.decoderFor('prefill', slots, prompts.P);
  const state = new SamplerState(e, slots, N, R, c.eosTokenIds);
  const progress = prompts.groupIds.map(() => new TurnProgress(c, [], c.stopStrings ?? [], R));
  const harvested = new Array<number>(N).fill(0);
  // Sampler dispatches before each admitted sample's first token: its column t comes from dispatch first + t + 1.
  const firstDispatch = new Array<number>(N).fill(-1);
  // The shared index starts past the longest prompt, so any prompt can end there.
  decoder.cache.reset(slots, prompts.P);
  let rows: (SlotSample | null)[] = new Array<SlotSample | null>(slots).fill(null);
  /** Samples [0, admitted) have taken a slot; the rest wait in order. */
  let admitted = 0;
  let dispatches = 0;

  /** Prefills the next waiting samples into the listed rows (ascending); returns their (k, V) logits. */
  const admit = (free: readonly number[]): { logits: Tensor; rows: number[] } => {
    const taken = free.slice(0, N - admitted);
    const samples = taken.map((_, k) => admitted + k);
    admitted += taken.length;
    const width = Math.max(...samples.map((i) => prompts.lengths[i]));
    const cut = (row: readonly number[]) => row.slice(prompts.P - width);
    prefill.reset(taken.length);
    const logits = decoders.feedBlock(prefill, samples.map((i) => cut(prompts.ids[i])), samples.map((i) => cut(prompts.mask[i])),
      samples.map((i) => cut(positionsFromMask(prompts.mask[i]))));
    decoder.cache.importRows(prefill.cache, taken.map((to, from) => ({ from, to })));
    taken.forEach((r, k) => {
      rows[r] = { sample: samples[k], progress: progress[samples[k]], windowStart: decoder.cache.length - width };
      firstDispatch[samples[k]] = dispatches;
      state.startRows(r, [{ sample: samples[k], position: prompts.lengths[samples[k]] - 1 }]);
    });
    return { logits, rows: taken };
  };

  // A read of the output rows of samples [lo, hi) after `dispatches` sampler dispatches.
  let pending: { dispatches: number; lo: number; hi: number; tokens: Promise<Uint32Array> } | null = null;
  const harvest = async (): Promise<void> => {
    if (!pending) return;
    const { dispatches: through, lo, hi, tokens } = pending;
    pending = null;
    const host = await tokens;
    for (let i = lo; i < hi; i++) {
      const p = progress[i];
      if (p.done) continue;
      const to = Math.min(R, through - firstDispatch[i]);
      if (to > harvested[i]) await p.take(host.subarray((i - lo) * R + harvested[i], (i - lo) * R + to));
      harvested[i] = Math.max(harvested[i], to);
    }
  };
  let logits = admit(rows.map((_, r) => r)).logits;
  for (;;) {
    const count = rows.length;
    sampleTokens(e, {
      logits, V: decoders.policy.config.vocabSize, rows: count, ...state.view(count), tokens: state.tokens, logprobs: state.logprobs,
      eosIds: state.eosIds, numEos: state.numEos, outStride: R, padId: c.padTokenId,
      temperature: c.temperature, topK: c.topK, topP: c.topP, seed: c.seed,
    });
    dispatches++;
    // Once the last sample admitted has drawn its R tokens every sample has: stop without the reads' lag
    // (up to 2·readEvery steps of decoding whose tokens nobody keeps).
    if (admitted === N && dispatches >= firstDispatch[N - 1] + R) break;
    let free: number[] = [];
    if (dispatches % readEvery === 0) {
      // Read this chunk's tokens without waiting; act on the previous chunk's, which has arrived meanwhile.
      await harvest();
      c.onProgress?.({ done: progress.filter((p) => p.done).length, total: N, tokens: progress.reduce((n, p) => n + p.tokens.length, 0) });
      const live = rows.filter((s): s is SlotSample => s !== null && !s.progress.done);
      if (live.length === 0 && admitted === N) break;
      const lo = Math.min(...live.map((s) => s.sample), admitted);
      if (admitted > lo) pending = { dispatches, lo, hi: admitted, tokens: e.read(state.tokens.view(state.tokens.name, lo * R, [(admitted - lo) * R])) };
      free = rows.flatMap((s, r) => (s === null || s.progress.done ? [r] : []));
      for (const r of free) if (rows[r]) { state.finish(r); rows[r] = null; }
      if (admitted === N && free.length > 0 && live.length <= compactBelow * count) {
        const keep = rows.flatMap((s, r) => (s ? [r] : []));
        decoder.keepRows(keep);
        state.keepRows(keep);
        rows = keep.map((r) => rows[r]);
        free = [];
      }
    }
    const cache = decoder.cache;
    if (cache.length === cache.capacity) {
      // Keep the longest prompt's width below the index: a newcomer's prompt ends there.
      const by = Math.min(cache.length - prompts.P, ...rows.flatMap((s) => (s ? [s.windowStart] : [])));
      cache.shiftSlots(by);
      for (const s of rows) if (s) s.windowStart -= by;
    }
    const next = state.view(rows.length);
    logits = decoder.extend({ ids: next.ids, positions: next.positions, T: 1, mask: null });
    if (free.length > 0 && admitted < N) {
      const newcomers = admit(free);
      const V = decoders.policy.config.vocabSize;
      // Newcomers sample their first token from their prompt's logits, the others from this step's.
      newcomers.rows.forEach((r, k) => e.copy(newcomers.logits.view(`${newcomers.logits.name}[${k}]`, k * V, [V]), logits.view(`${logits.name}[${r}]`, r * V, [V])));
    }
    e.flush();
  }
  await harvest();
  const tokens = await e.read(state.tokens);
  for (const [i, p] of progress.entries()) if (!p.done) await p.take(tokens.subarray(i * R + harvested[i], (i + 1) * R));
  const records = singleTurnRecords(progress, await e.read(state.logprobs), R);
  state.destroy();
  return records;
}
