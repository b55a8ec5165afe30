// What a rollout is asked for and what it returns, in the layout PPO consumes (verl's DataProto fields): the
// sampling config, the batch of prompts and responses, the policy it runs, a multi-turn environment's interface,
// and the checks of all of them before any decoding starts.
import type { Arena, FloatDType } from '../../engine/index.ts';
import type { DecoderConfig } from '../../models/hf-config.ts';
import type { LoraAdapters } from '../../models/lora-adapters.ts';
import type { SamplingParams } from '../../kernels/decode/sample.ts';
import type { Tokenizer } from '../../models/tokenizer.ts';

export interface RolloutConfig extends SamplingParams {
  /** Samples per prompt (a GRPO / RLOO group). */
  n: number;
  maxResponseLength: number;
  /** Any of these ends a response (it is kept, with response_mask 1), as generation_config.json's eos_token_id. */
  eosTokenIds: readonly number[];
  /** Fills prompts on the left and responses on the right. */
  padTokenId: number;
  /**
   * Generation goes on after an EOS (verl's rollout.ignore_eos, vLLM's and SGLang's ignore_eos): responses end at
   * maxResponseLength or a stop string, an EOS drawn as any other token. Single-turn rollouts only.
   */
  ignoreEos?: boolean;
  /** A response also ends at the token that completes one of these (kept); needs `decode`. */
  stopStrings?: readonly string[];
  decode?: (ids: readonly number[]) => string | Promise<string>;
  /** Decode steps between reads of the sampled ids (larger: fewer GPU round trips, later stops). */
  readEvery?: number;
  /** Drop finished rows once at most this fraction of the batch is still generating and none is waiting (0: never). */
  compactBelow?: number;
  /** Bytes the decode batch may allocate (KV caches, activations, logits): the trainer passes verl's
   *  rollout.gpu_memory_utilization × the device's memory (engine/device-memory.ts); unset, only the binding limits
   *  bound it. */
  memoryBudgetBytes?: number;
  /** Samples decoded at once, at most; the device's limits and memoryBudgetBytes may allow fewer. */
  maxSlots?: number;
  /** Told how far generation has come each time the host has read sampled ids (validation's progress line). */
  onProgress?: (progress: RolloutProgress) => void;
  /** Told the rows of each decode step (a benchmark's occupancy). */
  onDecodeStep?: (rows: number) => void;
  /** Told the rows of each prefill group (a benchmark's count of prefills). */
  onPrefill?: (rows: number) => void;
}

export interface RolloutProgress {
  /** Samples whose response has ended, of `total` (prompts × n). */
  done: number;
  total: number;
  /** Response tokens generated so far (observations of multi-turn rollouts not counted). */
  tokens: number;
}

/** verl's val_kwargs default: one greedy sample per prompt. */
export const VALIDATION_SAMPLING: Pick<RolloutConfig, 'n' | 'temperature' | 'topK' | 'topP'> = {
  n: 1,
  temperature: 0,
  topK: -1,
  topP: 1,
};

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
  /** The KV cache's storage (actor_rollout_ref.rollout.dtype); float32 when absent. */
  cacheDtype?: FloatDType;
}

/** The ids that end a response and pad one: config.json's eos and generation_config.json's (Qwen lists <|im_end|>
 *  and <|endoftext|> there), as vLLM stops; config.json's pad id, else the tokenizer's, else 0. */
export function endTokenIds(
  actor: DecoderConfig,
  generationConfig: { eosTokenIds: readonly number[] } | null,
  tokenizer: Pick<Tokenizer, 'special'>,
) {
  return {
    eosTokenIds: [...new Set([...actor.eosTokenIds, ...(generationConfig?.eosTokenIds ?? [])])],
    padTokenId: actor.padTokenId ?? tokenizer.special.pad?.id ?? 0,
  };
}

/** Decode steps between reads of the sampled ids when RolloutConfig.readEvery is unset. */
export const DEFAULT_READ_EVERY = 8;

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

/** Throws, naming the prompt, key or token, on inputs no rollout can decode. */
export function checkRolloutConfig(
  prompts: readonly (readonly number[])[],
  c: RolloutConfig,
  V: number,
  environment: TurnEnvironment | null,
): void {
  if (prompts.length === 0) throw new Error('rollout: no prompts');
  prompts.forEach((p, i) => {
    if (p.length === 0) throw new Error(`rollout: prompt ${i} is empty`);
    p.forEach((id) => {
      if (!Number.isInteger(id) || id < 0 || id >= V)
        throw new Error(`rollout: prompt ${i} holds token ${id}, outside the vocabulary [0, ${V})`);
    });
  });
  if (!Number.isInteger(c.n) || c.n < 1) throw new Error(`rollout: n = ${c.n}, expected a positive integer`);
  if (!Number.isInteger(c.maxResponseLength) || c.maxResponseLength < 1)
    throw new Error(`rollout: maxResponseLength = ${c.maxResponseLength}, expected a positive integer`);
  if (!Number.isInteger(c.padTokenId) || c.padTokenId < 0 || c.padTokenId >= V)
    throw new Error(`rollout: padTokenId = ${c.padTokenId} is outside the vocabulary [0, ${V})`);
  if (c.stopStrings?.length && !c.decode)
    throw new Error('rollout: stopStrings need a decode function (token ids → text)');
  if (environment) {
    if (c.ignoreEos)
      throw new Error('rollout: ignoreEos is for single-turn rollouts (a multi-turn turn ends at its EOS)');
    if (environment.turnEndStrings.length && !c.decode)
      throw new Error("rollout: the environment's turn-ending strings need a decode function (token ids → text)");
    if (!Number.isInteger(environment.maxTurns) || environment.maxTurns < 1)
      throw new Error(`rollout: environment maxTurns = ${environment.maxTurns}, expected a positive integer`);
    environment.turnEndTokenIds.forEach((id) => {
      if (!Number.isInteger(id) || id < 0 || id >= V)
        throw new Error(`rollout: turn-ending token ${id} is outside the vocabulary [0, ${V})`);
    });
  }
}
