// Rollout: generates responses for any number of prompts on the GPU and returns them in the layout PPO
// consumes (verl's DataProto fields). Samples decode in a fixed number of slots (rows), as many as the
// device's binding limits and the memory budget allow (`rolloutSlots`); as in vLLM's continuous batching, a
// finished sample's slot takes the next waiting one (prefilled on its own, then joined to the decode batch),
// so no slot waits for the slowest sample of a chunk. Sampling runs on the GPU and writes each step's token
// straight into the next step's input, so the host only reads token ids back every `readEvery` steps (to end
// samples, apply stop strings and refill slots). A sample's random stream is keyed by (seed, sample index,
// step), never by its slot, so the tokens do not depend on the slot count. The old log-prob of each sampled
// token comes out of the sampler, computed from the same logits, so it equals a teacher-forced pass over the
// finished sequence. Multi-turn rollouts (an environment) decode their turns in lockstep, slot-sized chunks
// of samples at a time.
// `generateWithoutCache` is the same rollout by full recomputation each step: the reference the cache is
// tested against and the baseline it is benchmarked against.
import type { Engine, Tensor, Arena } from '../../engine/index.ts';
import type { DeviceCapabilities } from '../../engine/device.ts';
import type { DecoderConfig } from '../../models/hf-config.ts';
import { qkvWidth } from '../../models/parameter-layout.ts';
import { IncrementalDecoder } from '../../models/incremental-decoder.ts';
import type { LoraAdapters } from '../../models/lora-adapters.ts';
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
  /** Drop finished rows once at most this fraction of the batch is still generating and none is waiting (0: never). */
  compactBelow?: number;
  /** Bytes the decode batch may allocate (KV caches, activations, logits): the trainer passes verl's
   *  rollout.gpu_memory_utilization × ASSUMED_DEVICE_MEMORY_BYTES; unset, only the binding limits bound it. */
  memoryBudgetBytes?: number;
  /** Samples decoded at once, at most; the device's limits and memoryBudgetBytes may allow fewer. */
  maxSlots?: number;
  /** Told how far generation has come each time the host has read sampled ids (validation's progress line). */
  onProgress?: (progress: RolloutProgress) => void;
}

export interface RolloutProgress {
  /** Samples whose response has ended, of `total` (prompts × n). */
  done: number;
  total: number;
  /** Response tokens generated so far (observations of multi-turn rollouts not counted). */
  tokens: number;
}

/** WebGPU reports no device memory: the rollout budget is a fraction of this size unless told the device's. */
export const ASSUMED_DEVICE_MEMORY_BYTES = 4 * 2 ** 30;

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

/** The model a rollout runs: a causal LM's config and parameter arena, and its LoRA adapters if any. */
export interface PolicyWeights {
  config: DecoderConfig;
  params: Arena;
  lora?: LoraAdapters | null;
}

const DEFAULT_READ_EVERY = 8;
const DEFAULT_COMPACT_BELOW = 0.5;
const RECOMPUTE_BUCKET = 16;
/** Decode steps between two slot shifts of the continuous cache, at least (a shift copies the whole cache). */
const MIN_SHIFT_INTERVAL = 64;

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

type PromptBatch = ReturnType<typeof promptBatch>;

/** Left-pads the prompts, each repeated n times. */
function promptBatch(prompts: readonly (readonly number[])[], c: RolloutConfig) {
  const P = Math.max(...prompts.map((p) => p.length));
  const groupIds = prompts.flatMap((_, g) => new Array<number>(c.n).fill(g));
  const ids = groupIds.map((g) => [...new Array<number>(P - prompts[g].length).fill(c.padTokenId), ...prompts[g]]);
  const mask = groupIds.map((g) => Array.from({ length: P }, (_, t) => (t >= P - prompts[g].length ? 1 : 0)));
  return { P, groupIds, ids, mask, lengths: groupIds.map((g) => prompts[g].length) };
}

/** Each sample's one-turn response and the (samples, R) log-probs of its tokens. */
function singleTurnRecords(progress: readonly TurnProgress[], logprobs: Float32Array, R: number): SampleRecord[] {
  return progress.map((p, i) => {
    const record = new SampleRecord();
    record.append(p.tokens, logprobs.subarray(i * R, i * R + p.tokens.length));
    record.reason = p.reason;
    return record;
  });
}

/** The PPO batch from the prompts and every sample's final response. */
function assemble(prompts: PromptBatch, records: readonly SampleRecord[], c: RolloutConfig): RolloutBatch {
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

/** The decode batch's memory per slot and the largest single tensor per slot, for a prompt width P. */
function slotFootprint(m: DecoderConfig, P: number, capacity: number) {
  const f32 = 4;
  const kvWidth = m.numKvHeads * m.headDim;
  const W = qkvWidth(m);
  const I = m.intermediateSize;
  const C = m.hiddenSize;
  const NHS = m.numHeads * m.headDim;
  // The decode cache (k and v per layer, one layer's compaction scratch, the key mask) and the prefill cache.
  const caches = (2 * m.numLayers + 1) * (capacity + P) * kvWidth * f32 + (capacity + P) * f32;
  // The prefill's activations (P tokens a slot, the largest call), and the LM head's rows.
  const activations = P * (3 * C + 2 * W + NHS + 3 * I + m.numHeads * 2) * f32;
  const head = (3 * C + m.vocabSize) * f32;
  const largest: [string, number][] = [
    ['a KV cache layer', capacity * kvWidth * f32], ['the prefill qkv', P * W * f32],
    ['the prefill gate_up', P * 2 * I * f32], ['the logits', m.vocabSize * f32],
  ];
  return { bytes: caches + activations + head, largest };
}

/**
 * How many samples decode at once: every tensor of the decode batch must fit one binding
 * (maxStorageBufferBindingSize, maxBufferSize) and the whole batch the memory budget.
 */
export function rolloutSlots(caps: Pick<DeviceCapabilities, 'maxBufferSize' | 'maxStorageBufferBindingSize'>, m: DecoderConfig,
  shape: { promptLength: number; capacity: number; samples: number }, c: Pick<RolloutConfig, 'memoryBudgetBytes' | 'maxSlots'>): number {
  const { bytes, largest } = slotFootprint(m, shape.promptLength, shape.capacity);
  const binding = Math.min(caps.maxStorageBufferBindingSize, caps.maxBufferSize);
  const [what, perSlot] = largest.reduce((x, y) => (y[1] > x[1] ? y : x));
  const budget = c.memoryBudgetBytes ?? Infinity;
  const slots = Math.min(shape.samples, c.maxSlots ?? Infinity, Math.floor(binding / perSlot), Math.floor(budget / bytes));
  if (slots < 1) {
    throw new Error(`rollout: one sample (prompt ${shape.promptLength} + cache ${shape.capacity} slots) needs ${bytes} bytes and ${perSlot} bytes for ${what}; ` +
      `the budget is ${budget} bytes (actor_rollout_ref.rollout.gpu_memory_utilization) and one binding holds ${binding}: ` +
      'lower data.max_prompt_length or data.max_response_length, or raise gpu_memory_utilization');
  }
  return slots;
}

/** GPU state of the sampler for `rows` rows writing the (samples, R) outputs. */
class SamplerState {
  readonly ids: Tensor<'u32'>;
  readonly positions: Tensor<'i32'>;
  readonly steps: Tensor<'u32'>;
  readonly finished: Tensor<'u32'>;
  readonly sampleIds: Tensor<'u32'>;
  readonly tokens: Tensor<'u32'>;
  readonly logprobs: Tensor<'f32'>;
  /** Ids that finish a row on the GPU: the EOS ids and an environment's turn-ending ids. */
  readonly eosIds: Tensor<'u32'>;
  readonly numEos: number;
  private readonly scratch: Tensor;

  constructor(private readonly engine: Engine, readonly rows: number, samples: number, readonly R: number, eosTokenIds: readonly number[]) {
    this.numEos = eosTokenIds.length;
    this.ids = engine.tensor('rollout.ids', [rows], 'u32');
    this.positions = engine.tensor('rollout.positions', [rows], 'i32');
    this.steps = engine.tensor('rollout.steps', [rows], 'u32');
    this.finished = engine.tensor('rollout.finished', [rows], 'u32');
    this.sampleIds = engine.tensor('rollout.sampleIds', [rows], 'u32');
    this.tokens = engine.tensor('rollout.tokens', [samples, R], 'u32');
    this.logprobs = engine.tensor('rollout.logprobs', [samples, R]);
    this.eosIds = engine.tensorFrom('rollout.eosIds', [Math.max(1, eosTokenIds.length)], eosTokenIds.length ? eosTokenIds : [0], 'u32');
    this.scratch = engine.tensor('rollout.compaction', [rows]);
  }

  private get perRow() {
    return [this.ids, this.positions, this.steps, this.finished, this.sampleIds];
  }

  /** The per-row tensors restricted to the first `rows` rows. */
  view(rows: number) {
    const view = <T extends Tensor>(t: T) => (rows === this.rows ? t : (t.view(t.name, 0, [rows]) as T));
    return { ids: view(this.ids), positions: view(this.positions), steps: view(this.steps), finished: view(this.finished), sampleIds: view(this.sampleIds) };
  }

  /** Starts rows [first, first + values.length) afresh: sample, position of its last token so far, step 0. */
  startRows(first: number, values: readonly { sample: number; position: number }[]): void {
    const range = <T extends Tensor>(t: T) => (first === 0 && values.length === this.rows ? t : (t.view(`${t.name}[${first}:]`, first, [values.length]) as T));
    this.engine.upload(range(this.sampleIds), values.map((v) => v.sample));
    this.engine.upload(range(this.positions), values.map((v) => v.position));
    this.engine.upload(range(this.steps), values.map(() => 0));
    this.engine.upload(range(this.finished), values.map(() => 0));
  }

  /** Sets row r's finished flag: the host ended it (a stop string, its budget) or it waits for nothing. */
  finish(r: number): void {
    this.engine.upload(this.finished.view(`${this.finished.name}[${r}]`, r, [1]), [1]);
  }

  keepRows(keep: readonly number[]): void {
    for (const t of this.perRow) keepTensorRows(this.engine, t, 1, keep, this.scratch);
  }

  destroy(): void {
    for (const t of [...this.perRow, this.tokens, this.logprobs, this.eosIds, this.scratch]) this.engine.destroyTensor(t);
  }
}

/** A sample decoding in a slot of the continuous batch. */
interface SlotSample {
  sample: number;
  progress: TurnProgress;
  /** Its first cache slot (its prompt's, padding included); earlier slots are masked for it. */
  windowStart: number;
}

/** Generates with a KV cache; keeps its caches and buffers between calls of the same or smaller size. */
export class RolloutGenerator {
  /** The decode batch's decoder, and the one continuous batching prefills newcomers in. */
  private readonly decoders = new Map<'decode' | 'prefill', IncrementalDecoder>();

  constructor(
    readonly engine: Engine,
    readonly policy: PolicyWeights,
  ) {}

  private decoderFor(role: 'decode' | 'prefill', rows: number, capacity: number): IncrementalDecoder {
    const d = this.decoders.get(role);
    if (d && d.cache.maxRows >= rows && d.cache.capacity >= capacity) return d;
    d?.destroy();
    const fresh = new IncrementalDecoder(this.engine, this.policy.config, this.policy.params, { maxRows: rows, capacity, lora: this.policy.lora });
    this.decoders.set(role, fresh);
    return fresh;
  }

  /**
   * n responses per prompt. Without an environment a response is one turn, decoded by continuous batching;
   * with one it grows turn by turn: after each turn the environment's observation is appended to the KV cache
   * (with the turn's last token, which the decode loop samples but does not feed) and generation continues
   * from the cache.
   */
  async generate(promptIds: readonly (readonly number[])[], c: RolloutConfig, environment: TurnEnvironment | null = null): Promise<RolloutBatch> {
    checkConfig(promptIds, c, this.policy.config.vocabSize, environment);
    const prompts = promptBatch(promptIds, c);
    const N = prompts.groupIds.length;
    const R = c.maxResponseLength;
    const readEvery = c.readEvery ?? DEFAULT_READ_EVERY;
    if (!environment) {
      // A sample's cache window: its prompt, R tokens, and up to 2·readEvery steps before the host sees it
      // end (reads lag one chunk); past that, room to decode between two shifts.
      const window = prompts.P + R + 2 * readEvery + 1;
      const capacity = window + Math.max(MIN_SHIFT_INTERVAL, Math.ceil(window / 4));
      const slots = rolloutSlots(this.engine.caps, this.policy.config, { promptLength: prompts.P, capacity, samples: N }, c);
      return assemble(prompts, await this.decodeContinuous(prompts, c, slots, capacity), c);
    }
    // A later turn fills at most R slots with its block (a turn's last token and an observation shorter than
    // the budget left) and fewer than R with decode steps, real or masked.
    const capacity = prompts.P + R + (environment.maxTurns - 1) * 2 * R;
    const slots = rolloutSlots(this.engine.caps, this.policy.config, { promptLength: prompts.P, capacity, samples: N }, c);
    const records = prompts.groupIds.map(() => new SampleRecord());
    for (let first = 0; first < N; first += slots) {
      const chunk = Array.from({ length: Math.min(slots, N - first) }, (_, k) => first + k);
      await this.decodeTurns(prompts, records, chunk, c, environment, capacity);
      c.onProgress?.({ done: first + chunk.length, total: N, tokens: records.reduce((n, r) => n + r.generated.reduce((a, g) => a + g, 0), 0) });
    }
    return assemble(prompts, records, c);
  }

  /**
   * Continuous batching: `slots` rows decode together in one cache whose slot index they share; a row whose
   * sample ended takes the next waiting sample, prefilled in a cache of its own and imported so that its
   * prompt ends at the shared index. When the index reaches the capacity, every row's slots shift left past
   * the oldest live sample's first slot.
   */
  private async decodeContinuous(prompts: PromptBatch, c: RolloutConfig, slots: number, capacity: number): Promise<SampleRecord[]> {
    const e = this.engine;
    const N = prompts.groupIds.length;
    const R = c.maxResponseLength;
    const readEvery = c.readEvery ?? DEFAULT_READ_EVERY;
    const compactBelow = c.compactBelow ?? DEFAULT_COMPACT_BELOW;
    const decoder = this.decoderFor('decode', slots, capacity);
    const prefill = this.decoderFor('prefill', slots, prompts.P);
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
      const logits = this.feedBlock(prefill, samples.map((i) => cut(prompts.ids[i])), samples.map((i) => cut(prompts.mask[i])),
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
        logits, V: this.policy.config.vocabSize, rows: count, ...state.view(count), tokens: state.tokens, logprobs: state.logprobs,
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
        const V = this.policy.config.vocabSize;
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

  /** Multi-turn decoding of the samples `chunk` (ascending) in lockstep, turn by turn. */
  private async decodeTurns(prompts: PromptBatch, records: SampleRecord[], chunk: readonly number[], c: RolloutConfig, environment: TurnEnvironment, capacity: number): Promise<void> {
    const e = this.engine;
    const R = c.maxResponseLength;
    const turnEndIds = environment.turnEndTokenIds;
    const stopStrings = [...(c.stopStrings ?? []), ...environment.turnEndStrings];
    const decoder = this.decoderFor('decode', chunk.length, capacity);
    const state = new SamplerState(e, chunk.length, prompts.groupIds.length, R, [...c.eosTokenIds, ...turnEndIds]);
    // rowSample[r]: the sample row r holds (the GPU's sampleIds, mirrored).
    let rowSample = [...chunk];

    decoder.reset(chunk.length);
    const width = Math.max(...chunk.map((i) => prompts.lengths[i]));
    const cut = (row: readonly number[]) => row.slice(prompts.P - width);
    let logits = this.feedBlock(decoder, chunk.map((i) => cut(prompts.ids[i])), chunk.map((i) => cut(prompts.mask[i])), chunk.map((i) => cut(positionsFromMask(prompts.mask[i]))));
    // The sampler increments positions before each token goes in: start at the last prompt token's.
    state.startRows(0, chunk.map((i) => ({ sample: i, position: prompts.lengths[i] - 1 })));
    for (let turn = 0; ; turn++) {
      const firstSlot = decoder.cache.length;
      const progress = new Map(rowSample.map((i) => [i, new TurnProgress(c, turnEndIds, stopStrings, R - records[i].tokens.length)]));
      const turnSeed = (c.seed ^ Math.imul(turn, 0x9e3779b9)) >>> 0;
      const decoded = await this.decodeTurn(decoder, state, logits, rowSample, progress, c, turnSeed);
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
      const blockWidth = Math.max(...blocks.map((b) => b.ids.length));
      const left = (b: { ids: number[] }) => blockWidth - b.ids.length;
      logits = this.feedBlock(
        decoder,
        blocks.map((b) => [...new Array<number>(left(b)).fill(c.padTokenId), ...b.ids]),
        blocks.map((b) => [...new Array<number>(left(b)).fill(0), ...b.ids.map(() => 1)]),
        blocks.map((b) => [...new Array<number>(left(b)).fill(1), ...b.ids.map((_, j) => b.prompt + b.first + j)]),
      );
      rowSample.forEach((i) => (records[i].cached = records[i].tokens.length));
      state.startRows(0, rowSample.map((i) => ({ sample: i, position: prompts.lengths[i] + records[i].tokens.length - 1 })));
    }
    state.destroy();
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
   * Decodes one turn for the rows held, in lockstep: samples up to the largest remaining budget, reading the
   * sampled ids every `readEvery` steps to end turns and set stop-string rows finished. Returns the (samples,
   * R) log-probs of the turn's tokens, and how many decode steps fed their token into the cache (every
   * sampled step but the last).
   */
  private async decodeTurn(
    decoder: IncrementalDecoder, state: SamplerState, firstLogits: Tensor, rowSample: readonly number[], progress: Map<number, TurnProgress>,
    c: RolloutConfig, seed: number,
  ): Promise<{ logprobs: Float32Array; fed: number }> {
    const e = this.engine;
    const V = this.policy.config.vocabSize;
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
        logits, V, rows, ...state.view(rows), tokens: state.tokens, logprobs: state.logprobs, eosIds: state.eosIds,
        numEos: state.numEos, outStride: R, padId: c.padTokenId,
        temperature: c.temperature, topK: c.topK, topP: c.topP, seed,
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

  destroy(): void {
    for (const d of this.decoders.values()) d.destroy();
    this.decoders.clear();
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
  const state = new SamplerState(e, N, N, R, c.eosTokenIds);
  state.startRows(0, prompts.lengths.map((n, i) => ({ sample: i, position: n - 1 })));
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
      logits, V, rows: N, rowStride: padded, rowOffset: T - 1, ...state.view(N), tokens: state.tokens, logprobs: state.logprobs,
      eosIds: state.eosIds, numEos: c.eosTokenIds.length, outStride: R, padId: c.padTokenId,
      temperature: c.temperature, topK: c.topK, topP: c.topP, seed: c.seed,
    });
    const next = await e.read(state.ids);
    destroyTokenBatch(e, batch);
    e.destroyTensor(logits);
    for (const [i, s] of samples.entries()) {
      if (!s.done) await s.take([next[i]]);
      if (s.reason === 'stop') state.finish(i);
      sequences[i].push(next[i]);
      masks[i].push(1);
    }
  }
  const records = singleTurnRecords(samples, await e.read(state.logprobs), R);
  state.destroy();
  return assemble(prompts, records, c);
}
