// Rollouts on inference servers (actor_rollout_ref.rollout.name=sglang|vllm): each step the actor's weights are
// published to the shared directory, every server loads them and must then give a fixed probe sequence the
// trainer's own log-probs (the fingerprint), and only then are the batch's prompts spread over the servers. The
// result is the in-process rollout's RolloutBatch, with the servers' log-probs as the sampler's; the trainer then
// recomputes old log-probs itself (verl's default), and the servers' feed rollout correction.
import type { RolloutBatch, RolloutConfig } from '../types.ts';
import { SampleRecord, assemble, promptBatch } from '../sample-records.ts';
import { ServerError, type ServerPool } from './server-pool.ts';
import {
  checkUpdateAnswer,
  generateCall,
  loraName,
  modelInfoCall,
  parseGenerate,
  parseModelInfo,
  weightUpdateCalls,
  type RolloutBackend,
  type SamplingRequest,
  type ServedModel,
  type ServerSample,
  type WeightsVersion,
} from './wire-format.ts';

/** Writes the actor's current weights where every server can read them (a new directory per version). */
export interface WeightsPublisher {
  publish(version: number): Promise<WeightsVersion>;
}

export interface ServerRolloutOptions {
  /** The actor's vocabulary: a token id outside it is the server's fault (another tokenizer). */
  vocabSize: number;
  /** Largest |server − trainer| log-prob of any probe token that still counts as the same weights. */
  fingerprintTolerance: number;
}

/** Length of the probe prompt, and tokens the server continues it with: enough that two different models cannot
 *  agree on all of them by chance. */
const PROBE_LENGTH = 8;

/**
 * The probe prompt: a fixed token sequence spread over the whole vocabulary (a multiplicative hash of the position).
 */
export function probeSequence(vocabSize: number): number[] {
  return Array.from({ length: PROBE_LENGTH }, (_, t) => Number((BigInt(t + 1) * 2654435761n) % BigInt(vocabSize)));
}

/** The probe's continuation: greedy, no stop token, so it depends on the weights alone. */
const PROBE_SAMPLING: SamplingRequest = {
  temperature: 0,
  topP: 1,
  topK: -1,
  maxTokens: PROBE_LENGTH,
  stopTokenIds: [],
  ignoreEos: false,
  seed: 0,
  sampleOffset: null,
};

/** The trainer's teacher-forced log-probs of ids[1…L−1] under its current weights. */
export type LocalLogProbs = (ids: readonly number[]) => Promise<number[]>;

export class ServerRollout {
  /** The version every live server has loaded and passed the fingerprint with; -1: none yet. */
  servedVersion = -1;
  private servedLora: string | null = null;
  /** Each server's model (vLLM routes completions by its name). */
  private readonly models = new Map<string, ServedModel>();
  /** Weight loads each server has acknowledged (what a test checks: one per step and server). */
  readonly loadsPerServer = new Map<string, number>();

  constructor(
    readonly pool: ServerPool,
    readonly backend: RolloutBackend,
    private readonly publisher: WeightsPublisher,
    private readonly options: ServerRolloutOptions,
  ) {}

  /** Asks every server who it is: a server of another backend (or none at the URL) stops the run here. */
  async connect(): Promise<void> {
    await this.pool.everyServer((url) => this.identify(url));
  }

  /** The server's model, asked once. */
  private async identify(url: string): Promise<ServedModel> {
    const known = this.models.get(url);
    if (known) return known;
    const call = modelInfoCall(this.backend);
    const model = await this.pool.request(url, call, `a ${this.backend} server (${call.path})`, (json) =>
      parseModelInfo(this.backend, json),
    );
    this.models.set(url, model);
    return model;
  }

  /**
   * Publishes `version`, loads it on every live server, and checks each one: its greedy continuation of the probe
   * prompt, with the log-prob of each token, must match the trainer's own log-probs of those tokens (`localLogProbs`,
   * from the same weights). Any failure throws before a single prompt is generated, so no step runs on stale weights.
   */
  async syncWeights(
    version: number,
    probeIds: readonly number[],
    localLogProbs: LocalLogProbs,
  ): Promise<Record<string, number>> {
    await this.connect();
    const weights = await this.publisher.publish(version);
    const calls = weightUpdateCalls(this.backend, weights, this.servedLora);
    const lora = weights.kind === 'lora' ? loraName(weights.version) : null;
    const probes = await this.pool.everyServer(async (url) => {
      for (const call of calls) {
        await this.pool.request(
          url,
          call,
          `the server to load ${weights.dir} (weights of step ${version})`,
          checkUpdateAnswer,
        );
      }
      this.loadsPerServer.set(url, (this.loadsPerServer.get(url) ?? 0) + 1);
      const [probe] = await this.pool.request(
        url,
        generateCall(this.backend, (await this.identify(url)).name, probeIds, 1, PROBE_SAMPLING, lora),
        'a greedy continuation of the probe prompt with its log-probs',
        (json) => parseGenerate(this.backend, json, 1, []),
      );
      return { url, probe };
    });
    let worst = 0;
    // One after the other: the trainer's forward passes share its buffers.
    for (const { url, probe } of probes) {
      const local = (await localLogProbs([...probeIds, ...probe.tokenIds])).slice(probeIds.length - 1);
      const gap = Math.max(...probe.logProbs.map((lp, t) => Math.abs(lp - local[t])));
      if (!(gap <= this.options.fingerprintTolerance)) {
        throw new ServerError(
          url,
          `${url}: after loading ${weights.dir} the server's log-probs of its probe tokens differ from the trainer's ` +
            `by up to ` +
            `${gap.toFixed(4)} (tolerance ` +
            `actor_rollout_ref.rollout.server_fingerprint_tol=${this.options.fingerprintTolerance}); expected a ` +
            `server of ` +
            `the same model and tokenizer as actor_rollout_ref.model.path, serving the weights it was just given` +
            (weights.kind === 'lora'
              ? ' (with LoRA: an adapter over that base model, which the server must have been started with)'
              : ''),
        );
      }
      worst = Math.max(worst, gap);
    }
    this.servedVersion = version;
    this.servedLora = lora;
    return { 'rollout_servers/fingerprint_max_gap': worst, 'rollout_servers/live': this.pool.urls.length };
  }

  /** n responses per prompt, one request per prompt, spread over the servers; the layout of the in-process rollout. */
  async generate(promptIds: readonly (readonly number[])[], c: RolloutConfig): Promise<RolloutBatch> {
    if (c.stopStrings?.length)
      throw new Error(
        'rollout servers: stop strings (multi-turn and search rollouts) are not supported; use ' +
          'actor_rollout_ref.rollout.name=hf',
      );
    const prompts = promptBatch(promptIds, c);
    const sampling = {
      temperature: c.temperature,
      topP: c.topP,
      topK: c.topK,
      maxTokens: c.maxResponseLength,
      // The servers stop at the EOS ids as stop tokens: with ignore_eos, at none.
      stopTokenIds: c.ignoreEos ? [] : c.eosTokenIds,
      ignoreEos: c.ignoreEos === true,
    };
    let done = 0,
      tokens = 0;
    const total = promptIds.length * c.n;
    const groups = await this.pool.spread(
      promptIds.map((ids, g) => ({ ids, g })),
      async (url, { ids, g }): Promise<ServerSample[]> => {
        // The same samples wherever a prompt runs, a retry included. serve.js: the step's seed and the prompt's first
        // sample index as its stream, the in-process rollout's draws; other servers: a seed of the prompt's own.
        const model = await this.identify(url);
        const seeds = model.engineServer
          ? { seed: c.seed, sampleOffset: g * c.n }
          : { seed: (c.seed + Math.imul(g, 0x9e3779b9)) >>> 0, sampleOffset: null };
        const call = generateCall(this.backend, model.name, ids, c.n, { ...sampling, ...seeds }, this.servedLora);
        const samples = await this.pool.request(url, call, `${c.n} completions of prompt ${g}`, (json) =>
          parseGenerate(this.backend, json, c.n, c.eosTokenIds),
        );
        samples.forEach((s, i) => checkSample(url, s, c, this.options.vocabSize, `prompt ${g} sample ${i}`));
        done += samples.length;
        tokens += samples.reduce((sum, s) => sum + s.tokenIds.length, 0);
        c.onProgress?.({ done, total, tokens });
        return samples;
      },
    );
    const records = groups.flat().map((s) => {
      const record = new SampleRecord();
      record.append(s.tokenIds, s.logProbs);
      record.reason = s.finishReason;
      return record;
    });
    return assemble(prompts, records, c);
  }
}

/** A response the batch cannot hold is the server's fault: too long, or a token outside the vocabulary. */
function checkSample(url: string, s: ServerSample, c: RolloutConfig, vocabSize: number, what: string): void {
  if (s.tokenIds.length === 0 || s.tokenIds.length > c.maxResponseLength || s.logProbs.length !== s.tokenIds.length) {
    throw new ServerError(
      url,
      `${url}: ${what} has ${s.tokenIds.length} tokens and ${s.logProbs.length} log-probs; expected 1 to ` +
        `max_tokens=${c.maxResponseLength} tokens, each with its log-prob`,
    );
  }
  const outside = s.tokenIds.find((id) => !(id >= 0 && id < vocabSize));
  if (outside !== undefined)
    throw new ServerError(
      url,
      `${url}: ${what} holds token ${outside}; expected ids in the actor's vocabulary [0, ${vocabSize}) (a server of ` +
        `another tokenizer?)`,
    );
  if (s.logProbs.some((lp) => !Number.isFinite(lp) || lp > 0))
    throw new ServerError(url, `${url}: ${what} has a log-prob that is not a finite number ≤ 0`);
}
