// Rollout: generates responses for a batch of prompts on the GPU and returns them in the layout PPO consumes
// (verl's DataProto fields). Prompts are left-padded into one batch, prefilled into a KV cache once, then
// decoded one token per step; sampling runs on the GPU and writes each step's token straight into the next
// step's input, so the host only reads token ids back every `readEvery` steps (to stop early, apply stop
// strings and drop finished rows). The old log-prob of each sampled token comes out of the sampler, computed
// from the same logits, so it equals a teacher-forced pass over the finished sequence.
// `generateWithoutCache` is the same rollout by full recomputation each step: the reference the cache is
// tested against and the baseline it is benchmarked against.
import type { Engine, Tensor, Arena } from '../../engine/index.ts';
import type { DecoderConfig } from '../../models/hf-config.ts';
import { IncrementalDecoder } from '../../models/incremental-decoder.ts';
import { keepTensorRows } from '../../models/kv-cache.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { positionsFromMask, uploadTokenBatch, destroyTokenBatch } from '../../models/token-batch.ts';
import { sampleTokens, type SamplingParams } from '../../kernels/sample.ts';

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
  decode?: (ids: readonly number[]) => string | Promise<string>;
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

function checkConfig(prompts: readonly (readonly number[])[], c: RolloutConfig, V: number, environment: TurnEnvironment | null): void {
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
  if (environment) {
    if (environment.turnEndStrings.length && !c.decode) throw new Error('rollout: the environment\'s turn-ending strings need a decode function (token ids → text)');
    if (!Number.isInteger(environment.maxTurns) || environment.maxTurns < 1) throw new Error(`rollout: environment maxTurns = ${environment.maxTurns}, expected a positive integer`);
    environment.turnEndTokenIds.forEach((id) => {
      if (!Number.isInteger(id) || id < 0 || id >= V) throw new Error(`rollout: turn-ending token ${id} is outside the vocabulary [0, ${V})`);
    });
  }
}

/**
 * A multi-turn environment (tool use, e.g. Search-R1's search engine). A turn ends at an EOS id, at one of the
 * environment's turn-ending tokens or strings, or at the response budget; the environment then reads what
 * each sample wrote and answers with observation tokens to append (masked out of the loss), or ends it.
 */
export interface TurnEnvironment {
  /** Turns at most, the last included: the rollout sizes its KV cache for them. */
  readonly maxTurns: number;
  /** Ids that end a turn besides the EOS ids (single-token tags such as </search>): detected on the GPU. */
  readonly turnEndTokenIds: readonly number[];
  /** Texts that end a turn (tags that are several tokens); needs RolloutConfig.decode. */
  readonly turnEndStrings: readonly string[];
  /** Per ended turn: the observation to append before the sample's next turn, or null when it is finished. */
  observe(turn: number, ended: readonly TurnEnd[]): Promise<(number[] | null)[]>;
}

export interface TurnEnd {
  sample: number;
  /** The tokens this turn generated (the turn-ending token included). */
  tokens: number[];
  reason: FinishReason;
  /** Response tokens so far, this turn included; the budget is maxResponseLength. */
  responseLength: number;
}

/** One sample's response as it grows: generated tokens (mask 1) and observations (mask 0). */
class SampleRecord {
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
class TurnProgress {
  readonly tokens: number[] = [];
  reason: FinishReason | null = null;

  constructor(
    private readonly config: RolloutConfig,
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
      else if (this.stopStrings.length && await this.endsOnStopString(decode!)) this.reason = 'stop';
      else if (this.tokens.length === this.budget) this.reason = 'length';
    }
  }

  private async endsOnStopString(decode: NonNullable<RolloutConfig['decode']>): Promise<boolean> {
    const text = await decode(this.tokens);
    return this.stopStrings.some((s) => text.includes(s));
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

/** The PPO batch from the prompts and every sample's final response. */
function assemble(prompts: ReturnType<typeof promptBatch>, records: readonly SampleRecord[], c: RolloutConfig): RolloutBatch {
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
    attentionMask: prompts.mask.map((m, i) => [...m, ...pad(records[i].tokens.map(() => 1), 0)]),
    positionIds: prompts.mask.map((m, i) => [...positionsFromMask(m), ...Array.from({ length: R }, (_, t) => prompts.lengths[i] + t)]),
    responseMask: records.map((s) => pad(s.generated, 0)),
    oldLogProbs: records.map((s) => Float32Array.from(pad(s.logprobs, 0))),
    responseLengths: records.map((s) => s.tokens.length),
    finishReasons: records.map((s) => s.reason ?? 'length'),
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
  /** Ids that finish a row on the GPU: the EOS ids and an environment's turn-ending ids. */
  readonly eosIds: Tensor<'u32'>;
  readonly numEos: number;
  private readonly scratch: Tensor;

  constructor(private readonly engine: Engine, readonly N: number, readonly R: number, eosTokenIds: readonly number[]) {
    this.numEos = eosTokenIds.length;
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

  /**
   * n responses per prompt. Without an environment a response is one turn; with one it grows turn by turn:
   * after each turn the environment's observation is appended to the KV cache (with the turn's last token,
   * which the decode loop samples but does not feed) and generation continues from the cache.
   */
  async generate(promptIds: readonly (readonly number[])[], c: RolloutConfig, environment: TurnEnvironment | null = null): Promise<RolloutBatch> {
    const e = this.engine;
    checkConfig(promptIds, c, this.policy.config.vocabSize, environment);
    const prompts = promptBatch(promptIds, c);
    const N = prompts.groupIds.length;
    const R = c.maxResponseLength;
    const records = prompts.groupIds.map(() => new SampleRecord());
    const turnEndIds = environment?.turnEndTokenIds ?? [];
    const stopStrings = [...(c.stopStrings ?? []), ...(environment?.turnEndStrings ?? [])];
    // A later turn fills at most R slots with its block (a turn's last token and an observation shorter than
    // the budget left) and fewer than R with decode steps, real or masked.
    const extraTurns = environment ? environment.maxTurns - 1 : 0;
    const decoder = this.decoderFor(N, prompts.P + R + extraTurns * 2 * R);
    const state = new SamplerState(e, N, R, [...c.eosTokenIds, ...turnEndIds]);
    // rowSample[r]: the sample row r holds (the GPU's sampleIds, mirrored).
    let rowSample = Array.from({ length: N }, (_, i) => i);

    decoder.reset(N);
    let logits = this.feedBlock(decoder, prompts.ids, prompts.mask, prompts.mask.map(positionsFromMask));
    // The sampler increments positions before each token goes in: start at the last prompt token's.
    e.upload(state.positions, prompts.lengths.map((n) => n - 1));
    for (let turn = 0; ; turn++) {
      const firstSlot = decoder.cache.length;
      const progress = new Map(rowSample.map((i) => [i, new TurnProgress(c, turnEndIds, stopStrings, R - records[i].tokens.length)]));
      const turnSeed = (c.seed ^ Math.imul(turn, 0x9e3779b9)) >>> 0;
      const decoded = await this.decodeTurn(decoder, state, logits, rowSample, progress, c, turnSeed, environment === null);
      rowSample = decoded.rowSample;
      for (const [i, p] of progress) {
        records[i].append(p.tokens, decoded.logprobs.subarray(i * R, i * R + p.tokens.length));
        records[i].reason = p.reason ?? 'length';
      }
      if (!environment) break;
      // Fed slots past a row's turn end (it waited for the others) leave attention; its last token, sampled
      // but not fed, goes into the next block.
      const junk = rowSample.map((i, row) => {
        const fed = Math.min(progress.get(i)!.tokens.length, decoded.fed);
        records[i].cached += fed;
        return { row, from: firstSlot + fed, to: firstSlot + decoded.fed };
      });

      const ended = rowSample.map((i) => ({ sample: i, tokens: progress.get(i)!.tokens, reason: records[i].reason!, responseLength: records[i].tokens.length }));
      const observations = await environment.observe(turn, ended);
      const keep: number[] = [];
      rowSample.forEach((i, row) => {
        const observation = observations[row];
        if (observation === null) return;
        if (turn + 1 >= environment.maxTurns) throw new Error(`rollout: the environment continued sample ${i} after its last turn (maxTurns ${environment.maxTurns})`);
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
      const blocks = rowSample.map((i) => ({ ids: records[i].tokens.slice(records[i].cached), first: records[i].cached, prompt: prompts.lengths[i] }));
      const width = Math.max(...blocks.map((b) => b.ids.length));
      const left = (b: { ids: number[] }) => width - b.ids.length;
      logits = this.feedBlock(
        decoder,
        blocks.map((b) => [...new Array<number>(left(b)).fill(c.padTokenId), ...b.ids]),
        blocks.map((b) => [...new Array<number>(left(b)).fill(0), ...b.ids.map(() => 1)]),
        blocks.map((b) => [...new Array<number>(left(b)).fill(1), ...b.ids.map((_, j) => b.prompt + b.first + j)]),
      );
      rowSample.forEach((i) => (records[i].cached = records[i].tokens.length));
      const rows = state.rows(rowSample.length);
      e.upload(rows.positions, rowSample.map((i) => prompts.lengths[i] + records[i].tokens.length - 1));
      e.upload(rows.finished, new Array<number>(rowSample.length).fill(0));
    }
    state.destroy();
    return assemble(prompts, records, c);
  }

  /** Appends a (rows, T) block of tokens to the cache; returns the logits of each row's last token. */
  private feedBlock(decoder: IncrementalDecoder, ids: number[][], mask: number[][], positions: number[][]): Tensor {
    const e = this.engine;
    const T = ids[0].length;
    const idsTensor = e.tensorFrom('rollout.blockIds', [ids.length * T], ids.flat(), 'u32');
    const positionsTensor = e.tensorFrom('rollout.blockPositions', [ids.length * T], positions.flat(), 'i32');
    const logits = decoder.extend({ ids: idsTensor, positions: positionsTensor, T, mask: mask.flat() });
    e.flush();
    e.destroyTensor(idsTensor);
    e.destroyTensor(positionsTensor);
    return logits;
  }

  /**
   * Decodes one turn for the rows held: samples up to the largest remaining budget, reading the sampled ids
   * every `readEvery` steps to end turns, set stop-string rows finished and (`compact`) drop finished rows.
   * Returns the rows still held, the (N, R) log-probs of the turn's tokens, and how many decode steps fed
   * their token into the cache (every sampled step but the last).
   */
  private async decodeTurn(
    decoder: IncrementalDecoder, state: SamplerState, firstLogits: Tensor, rowSample: number[], progress: Map<number, TurnProgress>,
    c: RolloutConfig, seed: number, compact: boolean,
  ): Promise<{ rowSample: number[]; logprobs: Float32Array; fed: number }> {
    const e = this.engine;
    const V = this.policy.config.vocabSize;
    const R = c.maxResponseLength;
    const readEvery = c.readEvery ?? DEFAULT_READ_EVERY;
    const compactBelow = c.compactBelow ?? DEFAULT_COMPACT_BELOW;
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
    for (let step = 0; step < steps; step++) {
      const rows = rowSample.length;
      sampleTokens(e, {
        logits, V, rows, ...state.rows(rows), tokens: state.tokens, logprobs: state.logprobs, eosIds: state.eosIds,
        numEos: state.numEos, outStride: R, step, padId: c.padTokenId,
        temperature: c.temperature, topK: c.topK, topP: c.topP, seed,
      });
      sampled = step + 1;
      if (step + 1 === steps) break;
      if ((step + 1) % readEvery === 0) {
        // Read this chunk's tokens without waiting; act on the previous chunk's, which has arrived meanwhile.
        await harvest();
        pending = { through: step + 1, tokens: e.read(state.tokens) };
        const active = rowSample.filter((i) => !progress.get(i)!.done);
        if (active.length === 0) break;
        this.stopFinishedByString(state, rowSample, progress);
        if (compact && active.length <= compactBelow * rows) {
          const keep = rowSample.flatMap((i, r) => (progress.get(i)!.done ? [] : [r]));
          decoder.keepRows(keep);
          state.keepRows(keep);
          rowSample = active;
        }
      }
      const next = state.rows(rowSample.length);
      logits = decoder.extend({ ids: next.ids, positions: next.positions, T: 1, mask: null });
      fed++;
      e.flush();
    }
    await harvest();
    await takeColumns(await e.read(state.tokens), harvested, sampled);
    return { rowSample, logprobs: await e.read(state.logprobs), fed };
  }

  /** Rows the host ended on a stop string keep generating on the GPU until told: set their finished flags. */
  private stopFinishedByString(state: SamplerState, rowSample: readonly number[], progress: Map<number, TurnProgress>): void {
    rowSample.forEach((i, r) => {
      if (progress.get(i)!.reason === 'stop') this.engine.upload(state.finished.view(`${state.finished.name}[${r}]`, r, [1]), [1]);
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
  checkConfig(promptIds, c, V, null);
  const prompts = promptBatch(promptIds, c);
  const N = prompts.groupIds.length;
  const R = c.maxResponseLength;
  const samples = prompts.groupIds.map(() => new TurnProgress(c, [], c.stopStrings ?? [], R));
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
    for (const [i, s] of samples.entries()) {
      if (!s.done) await s.take([next[i]]);
      if (s.reason === 'stop') e.upload(state.finished.view(`${state.finished.name}[${i}]`, i, [1]), [1]);
      sequences[i].push(next[i]);
      masks[i].push(1);
    }
  }
  const logprobs = await e.read(state.logprobs);
  state.destroy();
  const records = samples.map((s, i) => {
    const record = new SampleRecord();
    record.append(s.tokens, logprobs.subarray(i * R, i * R + s.tokens.length));
    record.reason = s.reason;
    return record;
  });
  return assemble(prompts, records, c);
}
