// Rollout: generates responses for a batch of prompts on the GPU and returns them in the layout PPO consumes
// (verl's DataProto fields). Prompts are left-padded into one batch, prefilled into a KV cache once, then
// decoded one token per step; sampling runs on the GPU and writes each step's token straight into the next
// step's input, so the host only reads token ids back every `readEvery` steps (to stop early, apply stop
// strings and drop finished rows). The old log-prob of each sampled token comes out of the sampler, computed
// from the same logits, so it equals a teacher-forced pass over the finished sequence.
// `generateWithoutCache` is the same rollout by full recomputation each step: the reference the cache is
// tested against and the baseline it is benchmarked against.
import type { Engine, Tensor, Arena } from '../engine/index.ts';
import type { DecoderConfig } from '../models/hf-config.ts';
import { IncrementalDecoder } from '../models/incremental-decoder.ts';
import { keepTensorRows } from '../models/kv-cache.ts';
import { CausalLm } from '../models/causal-lm.ts';
import { positionsFromMask, uploadTokenBatch, destroyTokenBatch } from '../models/token-batch.ts';
import { sampleTokens, type SamplingParams } from '../kernels/sample.ts';

export interface RolloutConfig extends SamplingParams {
  /** Samples per prompt (a GRPO / RLOO group). */
  n: number;
  maxResponseLength: number;
  /** Any of these ends a response (it is kept, with response_mask 1), as generation_config.json's eos_token_id. */
  eosTokenIds: readonly number[];
  /** Fills prompts on the left and responses on the right. */
  padTokenId: number;
  /** A response also ends at the token that completes one of these (kept); needs `decode`. */
  stopStrings?: readonly string[];
  decode?: (ids: readonly number[]) => string;
  /** Decode steps between reads of the sampled ids (larger: fewer GPU round trips, later stops). */
  readEvery?: number;
  /** Drop finished rows once at most this fraction of the batch is still generating (0: never). */
  compactBelow?: number;
}

/** verl's val_kwargs default: one greedy sample per prompt. */
export const VALIDATION_SAMPLING: Pick<RolloutConfig, 'n' | 'temperature' | 'topK' | 'topP'> = { n: 1, temperature: 0, topK: -1, topP: 1 };

export type FinishReason = 'eos' | 'stop' | 'length';

/** N = prompts·n samples; sample i answers prompt groupIds[i] = ⌊i / n⌋. P: longest prompt, R: maxResponseLength. */
export interface RolloutBatch {
  groupIds: number[];
  promptLength: number;
  responseLength: number;
  /** (N, P) left-padded with padTokenId. */
  prompts: number[][];
  /** (N, R) right-padded with padTokenId. */
  responses: number[][];
  /** (N, P + R) prompts then responses, with their attention mask and position ids (prompt positions count real
   *  tokens, padding gets 1 as in models/token-batch; response positions continue from the prompt's). */
  inputIds: number[][];
  attentionMask: number[][];
  positionIds: number[][];
  /** (N, R) 1 on generated tokens. */
  responseMask: number[][];
  /** (N, R) log_softmax(logits / temperature) of each generated token (1 for greedy); 0 on padding. */
  oldLogProbs: Float32Array[];
  responseLengths: number[];
  finishReasons: FinishReason[];
}

/** The model a rollout runs: a causal LM's config and parameter arena. */
export interface PolicyWeights {
  config: DecoderConfig;
  params: Arena;
}

const DEFAULT_READ_EVERY = 8;
const DEFAULT_COMPACT_BELOW = 0.5;
const RECOMPUTE_BUCKET = 16;

function checkConfig(prompts: readonly (readonly number[])[], c: RolloutConfig, V: number): void {
  if (prompts.length === 0) throw new Error('rollout: no prompts');
  prompts.forEach((p, i) => {
    if (p.length === 0) throw new Error(`rollout: prompt ${i} is empty`);
    p.forEach((id) => {
      if (!Number.isInteger(id) || id < 0 || id >= V) throw new Error(`rollout: prompt ${i} holds token ${id}, outside the vocabulary [0, ${V})`);
    });
  });
  if (!Number.isInteger(c.n) || c.n < 1) throw new Error(`rollout: n = ${c.n}, expected a positive integer`);
  if (!Number.isInteger(c.maxResponseLength) || c.maxResponseLength < 1) throw new Error(`rollout: maxResponseLength = ${c.maxResponseLength}, expected a positive integer`);
  if (!Number.isInteger(c.padTokenId) || c.padTokenId < 0 || c.padTokenId >= V) throw new Error(`rollout: padTokenId = ${c.padTokenId} is outside the vocabulary [0, ${V})`);
  if (c.stopStrings?.length && !c.decode) throw new Error('rollout: stopStrings need a decode function (token ids → text)');
}

/** The host's view of one sample while it generates, and the rule that ends it. */
class SampleProgress {
  readonly tokens: number[] = [];
  reason: FinishReason | null = null;

  constructor(private readonly config: RolloutConfig) {}

  get done(): boolean {
    return this.reason !== null;
  }

  /** Appends generated tokens until one ends the response. */
  take(tokens: ArrayLike<number>): void {
    const { eosTokenIds, stopStrings, decode, maxResponseLength } = this.config;
    for (let i = 0; i < tokens.length && !this.done; i++) {
      this.tokens.push(tokens[i]);
      if (eosTokenIds.includes(tokens[i])) this.reason = 'eos';
      else if (stopStrings?.length && stopStrings.some((s) => decode!(this.tokens).includes(s))) this.reason = 'stop';
      else if (this.tokens.length === maxResponseLength) this.reason = 'length';
    }
  }
}

/** Left-pads the prompts, each repeated n times. */
function promptBatch(prompts: readonly (readonly number[])[], c: RolloutConfig) {
  const P = Math.max(...prompts.map((p) => p.length));
  const groupIds = prompts.flatMap((_, g) => new Array<number>(c.n).fill(g));
  const ids = groupIds.map((g) => [...new Array<number>(P - prompts[g].length).fill(c.padTokenId), ...prompts[g]]);
  const mask = groupIds.map((g) => Array.from({ length: P }, (_, t) => (t >= P - prompts[g].length ? 1 : 0)));
  return { P, groupIds, ids, mask, lengths: groupIds.map((g) => prompts[g].length) };
}

/** The PPO batch from the prompts and every sample's final tokens and log-probs ((N, R) as generated). */
function assemble(prompts: ReturnType<typeof promptBatch>, samples: SampleProgress[], logprobs: Float32Array, c: RolloutConfig): RolloutBatch {
  const R = c.maxResponseLength;
  const pad = (row: readonly number[], value: number) => [...row, ...new Array<number>(R - row.length).fill(value)];
  const responses = samples.map((s) => pad(s.tokens, c.padTokenId));
  const responseMask = samples.map((s) => pad(s.tokens.map(() => 1), 0));
  return {
    groupIds: prompts.groupIds,
    promptLength: prompts.P,
    responseLength: R,
    prompts: prompts.ids,
    responses,
    inputIds: prompts.ids.map((p, i) => [...p, ...responses[i]]),
    attentionMask: prompts.mask.map((m, i) => [...m, ...responseMask[i]]),
    positionIds: prompts.mask.map((m, i) => [...positionsFromMask(m), ...Array.from({ length: R }, (_, t) => prompts.lengths[i] + t)]),
    responseMask,
    oldLogProbs: samples.map((s, i) => {
      const row = new Float32Array(R);
      row.set(logprobs.subarray(i * R, i * R + s.tokens.length));
      return row;
    }),
    responseLengths: samples.map((s) => s.tokens.length),
    finishReasons: samples.map((s) => s.reason ?? 'length'),
  };
}

/** GPU state of the sampler for N samples: (N) per row, (N, R) per sample. */
class SamplerState {
  readonly ids: Tensor<'u32'>;
  readonly positions: Tensor<'i32'>;
  readonly finished: Tensor<'u32'>;
  readonly sampleIds: Tensor<'u32'>;
  readonly tokens: Tensor<'u32'>;
  readonly logprobs: Tensor<'f32'>;
  readonly eosIds: Tensor<'u32'>;
  private readonly scratch: Tensor;

  constructor(private readonly engine: Engine, readonly N: number, readonly R: number, eosTokenIds: readonly number[]) {
    this.ids = engine.tensor('rollout.ids', [N], 'u32');
    this.positions = engine.tensor('rollout.positions', [N], 'i32');
    this.finished = engine.tensor('rollout.finished', [N], 'u32');
    this.sampleIds = engine.tensorFrom('rollout.sampleIds', [N], Array.from({ length: N }, (_, i) => i), 'u32');
    this.tokens = engine.tensor('rollout.tokens', [N, R], 'u32');
    this.logprobs = engine.tensor('rollout.logprobs', [N, R]);
    this.eosIds = engine.tensorFrom('rollout.eosIds', [Math.max(1, eosTokenIds.length)], eosTokenIds.length ? eosTokenIds : [0], 'u32');
    this.scratch = engine.tensor('rollout.compaction', [N]);
  }

  /** The per-row tensors restricted to the first `rows` rows. */
  rows(rows: number) {
    const view = <T extends Tensor>(t: T) => (rows === this.N ? t : (t.view(t.name, 0, [rows]) as T));
    return { ids: view(this.ids), positions: view(this.positions), finished: view(this.finished), sampleIds: view(this.sampleIds) };
  }

  keepRows(keep: readonly number[]): void {
    for (const t of [this.ids, this.positions, this.finished, this.sampleIds]) keepTensorRows(this.engine, t, 1, keep, this.scratch);
  }

  destroy(): void {
    for (const t of [this.ids, this.positions, this.finished, this.sampleIds, this.tokens, this.logprobs, this.eosIds, this.scratch]) this.engine.destroyTensor(t);
  }
}

/** Generates with a KV cache; keeps its cache and buffers between calls of the same or smaller size. */
export class RolloutGenerator {
  private decoder: IncrementalDecoder | null = null;

  constructor(
    readonly engine: Engine,
    readonly policy: PolicyWeights,
  ) {}

  private decoderFor(rows: number, capacity: number): IncrementalDecoder {
    const d = this.decoder;
    if (d && d.cache.maxRows >= rows && d.cache.capacity >= capacity) return d;
    d?.destroy();
    this.decoder = new IncrementalDecoder(this.engine, this.policy.config, this.policy.params, { maxRows: rows, capacity });
    return this.decoder;
  }

  async generate(promptIds: readonly (readonly number[])[], c: RolloutConfig): Promise<RolloutBatch> {
    const e = this.engine;
    const V = this.policy.config.vocabSize;
    checkConfig(promptIds, c, V);
    const prompts = promptBatch(promptIds, c);
    const { P } = prompts;
    const N = prompts.groupIds.length;
    const R = c.maxResponseLength;
    const readEvery = c.readEvery ?? DEFAULT_READ_EVERY;
    const compactBelow = c.compactBelow ?? DEFAULT_COMPACT_BELOW;
    const samples = prompts.groupIds.map(() => new SampleProgress(c));
    const decoder = this.decoderFor(N, P + R);
    const state = new SamplerState(e, N, R, c.eosTokenIds);
    // rowSample[r]: the sample row r holds (the GPU's sampleIds, mirrored).
    let rowSample = Array.from({ length: N }, (_, i) => i);

    decoder.reset(N);
    const promptIdsTensor = e.tensorFrom('rollout.promptIds', [N * P], prompts.ids.flat(), 'u32');
    const promptPositions = e.tensorFrom('rollout.promptPositions', [N * P], prompts.mask.flatMap(positionsFromMask), 'i32');
    let logits = decoder.extend({ ids: promptIdsTensor, positions: promptPositions, T: P, mask: prompts.mask.flat() });
    // The sampler increments positions before each token goes in: start at the last prompt token's.
    e.upload(state.positions, prompts.lengths.map((n) => n - 1));

    // Tokens read so far: columns [0, harvested) of every sample.
    let harvested = 0;
    let pending: { through: number; tokens: Promise<Uint32Array> } | null = null;
    const harvest = async (): Promise<void> => {
      if (!pending) return;
      const { through, tokens } = pending;
      pending = null;
      const host = await tokens;
      for (let i = 0; i < N; i++) if (!samples[i].done) samples[i].take(host.subarray(i * R + harvested, i * R + through));
      harvested = through;
    };

    for (let step = 0; step < R; step++) {
      const rows = rowSample.length;
      sampleTokens(e, {
        logits, V, rows, ...state.rows(rows), tokens: state.tokens, logprobs: state.logprobs, eosIds: state.eosIds,
        numEos: c.eosTokenIds.length, outStride: R, step, padId: c.padTokenId,
        temperature: c.temperature, topK: c.topK, topP: c.topP, seed: c.seed,
      });
      if (step + 1 === R) break;
      if ((step + 1) % readEvery === 0) {
        // Read this chunk's tokens without waiting; act on the previous chunk's, which has arrived meanwhile.
        await harvest();
        pending = { through: step + 1, tokens: e.read(state.tokens) };
        const active = rowSample.filter((i) => !samples[i].done);
        if (active.length === 0) break;
        this.stopFinishedByString(state, rowSample, samples);
        if (active.length <= compactBelow * rows) {
          const keep = rowSample.flatMap((i, r) => (samples[i].done ? [] : [r]));
          decoder.keepRows(keep);
          state.keepRows(keep);
          rowSample = active;
        }
      }
      const next = state.rows(rowSample.length);
      logits = decoder.extend({ ids: next.ids, positions: next.positions, T: 1, mask: null });
      e.flush();
    }
    await harvest();
    const tokens = await e.read(state.tokens);
    const logprobs = await e.read(state.logprobs);
    for (let i = 0; i < N; i++) if (!samples[i].done) samples[i].take(tokens.subarray(i * R + harvested, (i + 1) * R));
    e.destroyTensor(promptIdsTensor);
    e.destroyTensor(promptPositions);
    state.destroy();
    return assemble(prompts, samples, logprobs, c);
  }

  /** Rows the host ended on a stop string keep generating on the GPU until told: set their finished flags. */
  private stopFinishedByString(state: SamplerState, rowSample: readonly number[], samples: readonly SampleProgress[]): void {
    rowSample.forEach((i, r) => {
      if (samples[i].reason === 'stop') this.engine.upload(state.finished.view(`${state.finished.name}[${r}]`, r, [1]), [1]);
    });
  }

  destroy(): void {
    this.decoder?.destroy();
    this.decoder = null;
  }
}

/**
 * The same rollout without a cache: every step runs the whole sequence so far through CausalLm.logits and
 * reads the sampled ids back. The reference of the cached path (greedy tokens must agree exactly) and its
 * benchmark baseline; samples draw the same random numbers as in the cached path.
 */
export async function generateWithoutCache(lm: CausalLm, promptIds: readonly (readonly number[])[], c: RolloutConfig): Promise<RolloutBatch> {
  const e = lm.engine;
  const V = lm.config.vocabSize;
  checkConfig(promptIds, c, V);
  const prompts = promptBatch(promptIds, c);
  const N = prompts.groupIds.length;
  const R = c.maxResponseLength;
  const samples = prompts.groupIds.map(() => new SampleProgress(c));
  const state = new SamplerState(e, N, R, c.eosTokenIds);
  const sequences = prompts.ids.map((row) => [...row]);
  const masks = prompts.mask.map((row) => [...row]);
  for (let step = 0; step < R && samples.some((s) => !s.done); step++) {
    const T = prompts.P + step;
    // Right-padded to a multiple of RECOMPUTE_BUCKET: causal attention keeps the padding out of every real
    // position, and the trunk allocates one workspace per bucket rather than per length.
    const padded = Math.ceil(T / RECOMPUTE_BUCKET) * RECOMPUTE_BUCKET;
    const padding = (value: number) => new Array<number>(padded - T).fill(value);
    const batch = uploadTokenBatch(e, {
      inputIds: sequences.map((row) => [...row, ...padding(c.padTokenId)]),
      attentionMask: masks.map((row) => [...row, ...padding(0)]),
    }, V, 'rollout.recompute');
    const logits = lm.logits(batch, e.tensor('rollout.recompute.logits', [N * padded, V]));
    sampleTokens(e, {
      logits, V, rows: N, rowStride: padded, rowOffset: T - 1, ...state.rows(N), tokens: state.tokens, logprobs: state.logprobs,
      eosIds: state.eosIds, numEos: c.eosTokenIds.length, outStride: R, step, padId: c.padTokenId,
      temperature: c.temperature, topK: c.topK, topP: c.topP, seed: c.seed,
    });
    const next = await e.read(state.ids);
    destroyTokenBatch(e, batch);
    e.destroyTensor(logits);
    samples.forEach((s, i) => {
      if (!s.done) s.take([next[i]]);
      if (s.reason === 'stop') e.upload(state.finished.view(`${state.finished.name}[${i}]`, i, [1]), [1]);
      sequences[i].push(next[i]);
      masks[i].push(1);
    });
  }
  const logprobs = await e.read(state.logprobs);
  state.destroy();
  return assemble(prompts, samples, logprobs, c);
}
