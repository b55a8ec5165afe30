// Multi-turn rollouts (an environment, e.g. Search-R1's search engine): slot-sized chunks of samples decode their
// turns in lockstep. After each turn the environment's observation is appended to the KV cache (with the turn's
// last token, which the decode loop samples but does not feed) and generation continues from the cache.
import type { Tensor } from '../../engine/index.ts';
import type { IncrementalDecoder } from '../../models/incremental-decoder.ts';
import { positionsFromMask } from '../../models/token-batch.ts';
import { sampleTokens, type RowSampling } from '../../kernels/decode/sample.ts';
import { DEFAULT_READ_EVERY, type RolloutConfig, type TurnEnvironment } from './types.ts';
import { SampleRecord, TurnProgress, type PromptBatch } from './sample-records.ts';
import { SamplerState } from './sampler-state.ts';
import type { RolloutDecoders } from './decoders.ts';

/** The decode cache's slots for prompts of width P, responses of R tokens and up to maxTurns turns. */
export function multiTurnCacheCapacity(P: number, R: number, maxTurns: number): number {
  // A later turn fills at most R slots with its block (a turn's last token and an observation shorter than
  // the budget left) and fewer than R with decode steps, real or masked.
  return P + R + (maxTurns - 1) * 2 * R;
}

/** Every sample's response, decoded `slots` samples at a time. */
export async function decodeMultiTurn(
  decoders: RolloutDecoders,
  prompts: PromptBatch,
  c: RolloutConfig,
  environment: TurnEnvironment,
  slots: number,
  capacity: number,
): Promise<SampleRecord[]> {
  const N = prompts.groupIds.length;
  const records = prompts.groupIds.map(() => new SampleRecord());
  for (let first = 0; first < N; first += slots) {
    const chunk = Array.from({ length: Math.min(slots, N - first) }, (_, k) => first + k);
    await decodeTurns(decoders, prompts, records, chunk, c, environment, capacity);
    c.onProgress?.({
      done: first + chunk.length,
      total: N,
      tokens: records.reduce((n, r) => n + r.generated.reduce((a, g) => a + g, 0), 0),
    });
  }
  return records;
}

/** Multi-turn decoding of the samples `chunk` (ascending) in lockstep, turn by turn. */
async function decodeTurns(
  decoders: RolloutDecoders,
  prompts: PromptBatch,
  records: SampleRecord[],
  chunk: readonly number[],
  c: RolloutConfig,
  environment: TurnEnvironment,
  capacity: number,
): Promise<void> {
  const e = decoders.engine;
  const R = c.maxResponseLength;
  const turnEndIds = environment.turnEndTokenIds;
  const stopStrings = [...(c.stopStrings ?? []), ...environment.turnEndStrings];
  // Its calls: the prompts (at most P tokens), then per turn a block of at most R (multiTurnCacheCapacity).
  const decoder = decoders.decoderFor('decode', chunk.length, capacity, Math.max(prompts.P, R));
  const state = new SamplerState(e, chunk.length, prompts.groupIds.length, R, [...c.eosTokenIds, ...turnEndIds]);
  // rowSample[r]: the sample row r holds (the GPU's streams and output rows, mirrored).
  let rowSample = [...chunk];
  // Each turn draws from its own seed, so a later turn does not replay the first turn's random numbers.
  const sampling = (i: number, turn: number): RowSampling => ({
    temperature: c.temperature,
    topK: c.topK,
    topP: c.topP,
    seed: (c.seed ^ Math.imul(turn, 0x9e3779b9)) >>> 0,
    stream: i,
    outRow: i,
  });

  decoder.reset(chunk.length);
  const width = Math.max(...chunk.map((i) => prompts.lengths[i]));
  const cut = (row: readonly number[]) => row.slice(prompts.P - width);
  let logits = decoders.feedBlock(
    decoder,
    chunk.map((i) => cut(prompts.ids[i])),
    chunk.map((i) => cut(prompts.mask[i])),
    chunk.map((i) => cut(positionsFromMask(prompts.mask[i]))),
  );
  // The sampler increments positions before each token goes in: start at the last prompt token's.
  state.startRows(
    0,
    chunk.map((i) => ({ sampling: sampling(i, 0), position: prompts.lengths[i] - 1 })),
  );
  for (let turn = 0; ; turn++) {
    const firstSlot = decoder.cache.length;
    const progress = new Map(
      rowSample.map((i) => [i, new TurnProgress(c, turnEndIds, stopStrings, R - records[i].tokens.length)]),
    );
    const decoded = await decodeTurn(decoders, decoder, state, logits, rowSample, progress, c);
    for (const [i, p] of progress) {
      records[i].append(p.tokens, decoded.logprobs.subarray(i * R, i * R + p.tokens.length));
      records[i].reason = p.reason ?? 'length';
    }
    // Fed slots past a row's turn end (it waited for the others) leave attention; its last token, sampled
    // but not fed, goes into the next block.
    const junk = rowSample.map((i, row) => {
      const fed = Math.min(progress.get(i)!.tokens.length, decoded.fed);
      records[i].cached += fed;
      return { row, from: firstSlot + fed, to: firstSlot + decoded.fed };
    });

    const ended = rowSample.map((i) => ({
      sample: i,
      tokens: progress.get(i)!.tokens,
      reason: records[i].reason!,
      responseLength: records[i].tokens.length,
    }));
    const observations = await environment.observe(turn, ended);
    const keep: number[] = [];
    rowSample.forEach((i, row) => {
      const observation = observations[row];
      if (observation === null) return;
      if (turn + 1 >= environment.maxTurns)
        throw new Error(
          `rollout: the environment continued sample ${i} after its last turn (maxTurns ${environment.maxTurns})`,
        );
      // An observation with no room left to answer after it ends the response instead.
      if (records[i].tokens.length + observation.length >= R) {
        records[i].reason = 'length';
        return;
      }
      records[i].append(observation, null);
      records[i].reason = null;
      keep.push(row);
    });
    if (keep.length === 0) break;
    decoder.cache.maskSlots(junk);
    decoder.keepRows(keep);
    state.keepRows(keep);
    rowSample = keep.map((row) => rowSample[row]);

    // The next block per row: its unfed token(s), then its observation, left-padded to a common width.
    const blocks = rowSample.map((i) => ({
      ids: records[i].tokens.slice(records[i].cached),
      first: records[i].cached,
      prompt: prompts.lengths[i],
    }));
    const blockWidth = Math.max(...blocks.map((b) => b.ids.length));
    const left = (b: { ids: number[] }) => blockWidth - b.ids.length;
    logits = decoders.feedBlock(
      decoder,
      blocks.map((b) => [...new Array<number>(left(b)).fill(c.padTokenId), ...b.ids]),
      blocks.map((b) => [...new Array<number>(left(b)).fill(0), ...b.ids.map(() => 1)]),
      blocks.map((b) => [...new Array<number>(left(b)).fill(1), ...b.ids.map((_, j) => b.prompt + b.first + j)]),
    );
    rowSample.forEach((i) => (records[i].cached = records[i].tokens.length));
    state.startRows(
      0,
      rowSample.map((i) => ({
        sampling: sampling(i, turn + 1),
        position: prompts.lengths[i] + records[i].tokens.length - 1,
      })),
    );
  }
  state.destroy();
}

/**
 * Decodes one turn for the rows held, in lockstep: samples up to the largest remaining budget, reading the
 * sampled ids every `readEvery` steps to end turns and set stop-string rows finished. Returns the (samples,
 * R) log-probs of the turn's tokens, and how many decode steps fed their token into the cache (every
 * sampled step but the last).
 */
async function decodeTurn(
  decoders: RolloutDecoders,
  decoder: IncrementalDecoder,
  state: SamplerState,
  firstLogits: Tensor,
  rowSample: readonly number[],
  progress: Map<number, TurnProgress>,
  c: RolloutConfig,
): Promise<{ logprobs: Float32Array; fed: number }> {
  const e = decoders.engine;
  const V = decoders.policy.config.vocabSize;
  const R = c.maxResponseLength;
  const readEvery = c.readEvery ?? DEFAULT_READ_EVERY;
  const steps = Math.max(...[...progress.values()].map((p) => p.budget));
  // Tokens read so far: columns [0, harvested) of every sample.
  let harvested = 0;
  let pending: { through: number; tokens: Promise<Uint32Array> } | null = null;
  const takeColumns = async (host: Uint32Array, from: number, to: number) => {
    for (const [i, p] of progress) if (!p.done) await p.take(host.subarray(i * R + from, i * R + to));
  };
  const harvest = async (): Promise<void> => {
    if (!pending) return;
    const { through, tokens } = pending;
    pending = null;
    await takeColumns(await tokens, harvested, through);
    harvested = through;
  };

  let logits = firstLogits;
  let sampled = 0;
  let fed = 0;
  const rows = rowSample.length;
  for (let step = 0; step < steps; step++) {
    sampleTokens(e, {
      logits,
      V,
      rows,
      ...state.view(rows),
      tokens: state.tokens,
      logprobs: state.logprobs,
      outStride: R,
      padId: c.padTokenId,
    });
    sampled = step + 1;
    if (step + 1 === steps) break;
    if ((step + 1) % readEvery === 0) {
      // Read this chunk's tokens without waiting; act on the previous chunk's, which has arrived meanwhile.
      await harvest();
      pending = { through: step + 1, tokens: e.read(state.tokens) };
      if (rowSample.every((i) => progress.get(i)!.done)) break;
      rowSample.forEach((i, r) => {
        if (progress.get(i)!.reason === 'stop') state.finish(r);
      });
    }
    const next = state.view(rows);
    logits = decoder.extend({ ids: next.ids, positions: next.positions, T: 1, mask: null });
    fed++;
    e.flush();
  }
  await harvest();
  await takeColumns(await e.read(state.tokens), harvested, sampled);
  return { logprobs: await e.read(state.logprobs), fed };
}
