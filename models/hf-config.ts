// Hugging Face config.json ⇄ DecoderConfig for the decoder families this engine implements: Llama, Qwen2,
// Qwen3, each as causal LM (actor), token classifier (critic: value = logits[..., 0]) or sequence classifier
// (reward model: score at the rightmost non-pad token). Defaults mirror transformers' config classes;
// anything the engine does not implement is an error naming the key, never silently ignored.
// Browser-safe: takes parsed JSON or text.
import type { FloatDType } from '../engine/index.ts';

export type ModelFamily = 'llama' | 'qwen2' | 'qwen3';
export type HeadKind = 'causal-lm' | 'token-classification' | 'sequence-classification';
/** config.json's torch_dtype: the dtype the weights were published in, and are saved back in. */
export type TorchDtype = 'float32' | 'bfloat16' | 'float16';
const TORCH_DTYPES: readonly TorchDtype[] = ['float32', 'bfloat16', 'float16'];
/** The engine's storage dtype of each torch_dtype. */
export const TORCH_DTYPE_STORAGE: Readonly<Record<TorchDtype, FloatDType>> = {
  float32: 'f32',
  bfloat16: 'bf16',
  float16: 'f16',
};

export interface DecoderConfig {
  /** The HF class, e.g. 'Qwen2ForCausalLM'. */
  architecture: string;
  family: ModelFamily;
  head: HeadKind;
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  /** Decoupled from hiddenSize/numHeads (Qwen3, recent Llama configs). */
  headDim: number;
  ropeTheta: number;
  rmsNormEps: number;
  tieWordEmbeddings: boolean;
  /** Bias on q_proj, k_proj, v_proj. Qwen2: always (hard-coded in HF); Llama, Qwen3: config.attention_bias. */
  attentionBias: boolean;
  /** Bias on o_proj. Qwen2: never; Llama, Qwen3: config.attention_bias. */
  outputBias: boolean;
  /** Per-head RMSNorm of q and k before RoPE (Qwen3). */
  qkNorm: boolean;
  /** 1 for the classification heads, null for a causal LM. */
  numLabels: number | null;
  padTokenId: number | null;
  bosTokenId: number | null;
  eosTokenIds: number[];
  maxPositionEmbeddings: number;
  /** torch_dtype (transformers 5: dtype); float32 when absent. */
  torchDtype: TorchDtype;
}

/**
 * The fields that make two decoder configs the same network: the weights of one load into the other and compute the
 * same function.
 */
const NETWORK_FIELDS = [
  'family',
  'head',
  'vocabSize',
  'hiddenSize',
  'intermediateSize',
  'numLayers',
  'numHeads',
  'numKvHeads',
  'headDim',
  'tieWordEmbeddings',
  'attentionBias',
  'outputBias',
  'qkNorm',
  'ropeTheta',
  'rmsNormEps',
] as const;

/** Where `other` is another network than `base`: "field base vs other" per differing field (empty when the same). */
export function networkDifferences(base: DecoderConfig, other: DecoderConfig): string[] {
  return NETWORK_FIELDS.filter((field) => base[field] !== other[field]).map(
    (field) => `${field} ${base[field]} vs ${other[field]}`,
  );
}

export class HfConfigError extends Error {
  override name = 'HfConfigError';
}

const FAMILY_PREFIX: Readonly<Record<ModelFamily, string>> = { llama: 'Llama', qwen2: 'Qwen2', qwen3: 'Qwen3' };
const HEAD_SUFFIX: Readonly<Record<HeadKind, string>> = {
  'causal-lm': 'ForCausalLM',
  'token-classification': 'ForTokenClassification',
  'sequence-classification': 'ForSequenceClassification',
};

export function architectureName(family: ModelFamily, head: HeadKind): string {
  return FAMILY_PREFIX[family] + HEAD_SUFFIX[head];
}

export const SUPPORTED_ARCHITECTURES: readonly string[] = (Object.keys(FAMILY_PREFIX) as ModelFamily[]).flatMap((f) =>
  (Object.keys(HEAD_SUFFIX) as HeadKind[]).map((h) => architectureName(f, h)),
);

function splitArchitecture(architecture: string): { family: ModelFamily; head: HeadKind } | null {
  for (const family of Object.keys(FAMILY_PREFIX) as ModelFamily[]) {
    for (const head of Object.keys(HEAD_SUFFIX) as HeadKind[]) {
      if (architectureName(family, head) === architecture) return { family, head };
    }
  }
  return null;
}

// transformers' defaults for keys a config.json may omit (LlamaConfig, Qwen2Config, Qwen3Config).
const FAMILY_DEFAULTS: Readonly<
  Record<
    ModelFamily,
    { maxPositionEmbeddings: number; bosTokenId: number | null; eosTokenId: number | null; headDim: number | null }
  >
> = {
  llama: { maxPositionEmbeddings: 2048, bosTokenId: 1, eosTokenId: 2, headDim: null },
  qwen2: { maxPositionEmbeddings: 32768, bosTokenId: null, eosTokenId: null, headDim: null },
  // Qwen3Config defaults head_dim to 128 rather than hidden_size / num_attention_heads.
  qwen3: { maxPositionEmbeddings: 32768, bosTokenId: null, eosTokenId: null, headDim: 128 },
};
/** Qwen2Config / Qwen3Config default: layers at or above this index use the sliding window when enabled. */
const DEFAULT_MAX_WINDOW_LAYERS = 28;

/** Reads keys of one config.json with errors that name the file and the key. */
class ConfigReader {
  constructor(
    readonly json: Record<string, unknown>,
    readonly file: string,
  ) {}

  fail(key: string, what: string): never {
    throw new HfConfigError(`${this.file}: '${key}' ${what}`);
  }

  has(key: string): boolean {
    return this.json[key] !== undefined && this.json[key] !== null;
  }

  positiveInt(key: string, fallback?: number): number {
    if (!this.has(key)) {
      if (fallback !== undefined) return fallback;
      this.fail(key, 'is missing (required)');
    }
    const v = this.json[key];
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v <= 0)
      this.fail(key, `is ${JSON.stringify(v)}, expected a positive integer`);
    return v;
  }

  positiveNumber(key: string, fallback: number): number {
    if (!this.has(key)) return fallback;
    const v = this.json[key];
    if (typeof v !== 'number' || !(v > 0) || !Number.isFinite(v))
      this.fail(key, `is ${JSON.stringify(v)}, expected a positive number`);
    return v;
  }

  boolean(key: string, fallback: boolean): boolean {
    if (!this.has(key)) return fallback;
    const v = this.json[key];
    if (typeof v !== 'boolean') this.fail(key, `is ${JSON.stringify(v)}, expected true or false`);
    return v;
  }

  // Token ids: an absent key takes the class default, an explicit null means none (as in transformers).
  tokenId(key: string, fallback: number | null): number | null {
    const v = this.json[key];
    if (v === undefined) return fallback;
    if (v === null) return null;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0)
      this.fail(key, `is ${JSON.stringify(v)}, expected a token id`);
    return v;
  }

  tokenIds(key: string, fallback: number | null): number[] {
    const v = this.json[key] === undefined ? fallback : this.json[key];
    if (v === null) return [];
    const ids = Array.isArray(v) ? v : [v];
    if (!ids.every((id) => typeof id === 'number' && Number.isSafeInteger(id) && id >= 0))
      this.fail(key, `is ${JSON.stringify(v)}, expected a token id or a list of them`);
    return ids as number[];
  }
}

function readArchitecture(r: ConfigReader): { architecture: string; family: ModelFamily; head: HeadKind } {
  const archs = r.json.architectures;
  if (archs === undefined || archs === null)
    r.fail('architectures', `is missing (required: one of ${SUPPORTED_ARCHITECTURES.join(', ')})`);
  if (!Array.isArray(archs) || archs.length !== 1 || typeof archs[0] !== 'string')
    r.fail('architectures', `is ${JSON.stringify(archs)}, expected a list of exactly one class name`);
  const architecture = archs[0] as string;
  const split = splitArchitecture(architecture);
  if (!split)
    r.fail(
      'architectures',
      `names unsupported architecture ${architecture} (supported: ${SUPPORTED_ARCHITECTURES.join(', ')})`,
    );
  const modelType = r.json.model_type;
  if (modelType !== undefined && modelType !== split.family)
    r.fail('model_type', `is ${JSON.stringify(modelType)}, but architecture ${architecture} needs '${split.family}'`);
  return { architecture, ...split };
}

/** RoPE must be the plain variant: rope_scaling (or transformers 5's rope_parameters) of type 'default' or absent. */
function readRopeTheta(r: ConfigReader): number {
  for (const key of ['rope_scaling', 'rope_parameters']) {
    if (!r.has(key)) continue;
    const v = r.json[key];
    if (typeof v !== 'object' || Array.isArray(v)) r.fail(key, `is ${JSON.stringify(v)}, expected null or an object`);
    const type = (v as Record<string, unknown>).rope_type ?? (v as Record<string, unknown>).type ?? 'default';
    if (type !== 'default')
      r.fail(key, `has type ${JSON.stringify(type)}; only plain RoPE ('default' or null) is implemented`);
  }
  if (r.has('rope_parameters')) {
    const theta = (r.json.rope_parameters as Record<string, unknown>).rope_theta;
    if (theta !== undefined) {
      if (typeof theta !== 'number' || !(theta > 0))
        r.fail('rope_parameters', `has rope_theta ${JSON.stringify(theta)}, expected a positive number`);
      return theta;
    }
  }
  return r.positiveNumber('rope_theta', 10000);
}

function checkFullAttention(r: ConfigReader, family: ModelFamily, numLayers: number): void {
  if (r.has('layer_types')) {
    const types = r.json.layer_types;
    if (!Array.isArray(types) || types.length !== numLayers)
      r.fail('layer_types', `is ${JSON.stringify(types)}, expected ${numLayers} entries`);
    const other = types.findIndex((t) => t !== 'full_attention');
    if (other >= 0)
      r.fail(
        'layer_types',
        `gives layer ${other} ${JSON.stringify(types[other])}; only full causal attention is implemented`,
      );
  }
  if (family === 'llama' || !r.boolean('use_sliding_window', false) || !r.has('sliding_window')) return;
  // As in HF: the window applies to layers with index >= max_window_layers, so it may be enabled yet unused.
  const maxWindowLayers = r.has('max_window_layers') ? r.positiveInt('max_window_layers') : DEFAULT_MAX_WINDOW_LAYERS;
  if (maxWindowLayers < numLayers) {
    r.fail(
      'use_sliding_window',
      `is true and layers ${maxWindowLayers}..${numLayers - 1} would use a sliding window of ` +
        `${JSON.stringify(r.json.sliding_window)}; sliding-window attention is not implemented`,
    );
  }
}

function checkNoUnsupported(r: ConfigReader): void {
  const act = r.json.hidden_act ?? 'silu';
  // ACT2FN maps both names to SiLU.
  if (act !== 'silu' && act !== 'swish') r.fail('hidden_act', `is ${JSON.stringify(act)}; only silu is implemented`);
  if (r.boolean('mlp_bias', false)) r.fail('mlp_bias', 'is true; MLP biases are not implemented');
  const dropout = r.json.attention_dropout ?? 0;
  if (dropout !== 0)
    r.fail('attention_dropout', `is ${JSON.stringify(dropout)}; attention dropout is not implemented (set it to 0.0)`);
}

function readTorchDtype(r: ConfigReader): TorchDtype {
  const key = r.has('torch_dtype') ? 'torch_dtype' : 'dtype';
  const value = r.json[key] ?? 'float32';
  if (!TORCH_DTYPES.includes(value as TorchDtype))
    r.fail(key, `is ${JSON.stringify(value)}, expected one of ${TORCH_DTYPES.join(', ')}`);
  return value as TorchDtype;
}

function readNumLabels(r: ConfigReader, architecture: string): number {
  // transformers serialises num_labels as id2label; with neither, PretrainedConfig defaults to 2.
  let numLabels = 2;
  let source = 'the transformers default';
  if (r.has('num_labels')) {
    numLabels = r.positiveInt('num_labels');
    source = 'num_labels';
  } else if (r.has('id2label')) {
    const map = r.json.id2label;
    if (typeof map !== 'object' || Array.isArray(map))
      r.fail('id2label', `is ${JSON.stringify(map)}, expected an object`);
    numLabels = Object.keys(map as object).length;
    source = 'id2label';
  }
  if (numLabels !== 1)
    r.fail(
      r.has('num_labels') ? 'num_labels' : 'id2label',
      `gives ${numLabels} labels (from ${source}); ${architecture} is used as a value or reward head and needs ` +
        `exactly 1`,
    );
  return numLabels;
}

/** Parses and validates config.json (object or text) into a DecoderConfig. */
export function parseHfConfig(input: unknown, file = 'config.json'): DecoderConfig {
  let json = input;
  if (typeof input === 'string') {
    try {
      json = JSON.parse(input);
    } catch (err) {
      throw new HfConfigError(`${file}: not valid JSON (${(err as Error).message})`);
    }
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw new HfConfigError(`${file}: expected a JSON object`);
  const r = new ConfigReader(json as Record<string, unknown>, file);

  const { architecture, family, head } = readArchitecture(r);
  const defaults = FAMILY_DEFAULTS[family];
  const hiddenSize = r.positiveInt('hidden_size');
  const numHeads = r.positiveInt('num_attention_heads');
  const numKvHeads = r.positiveInt('num_key_value_heads', numHeads);
  if (numHeads % numKvHeads !== 0)
    r.fail('num_key_value_heads', `is ${numKvHeads}, which does not divide num_attention_heads ${numHeads}`);
  if (defaults.headDim === null && !r.has('head_dim') && hiddenSize % numHeads !== 0) {
    r.fail('hidden_size', `${hiddenSize} is not divisible by num_attention_heads ${numHeads} and no head_dim is given`);
  }
  const headDim = r.positiveInt('head_dim', defaults.headDim ?? hiddenSize / numHeads);
  if (headDim % 2 !== 0) r.fail('head_dim', `is ${headDim}; RoPE rotates pairs and needs an even head size`);
  const numLayers = r.positiveInt('num_hidden_layers');
  const attentionBiasKey = r.boolean('attention_bias', false);
  checkNoUnsupported(r);
  checkFullAttention(r, family, numLayers);

  const padTokenId = r.tokenId('pad_token_id', null);
  if (head === 'sequence-classification' && padTokenId === null) {
    r.fail('pad_token_id', `is missing; ${architecture} reads the score at the rightmost non-pad token and needs it`);
  }
  const bosTokenId = r.tokenId('bos_token_id', defaults.bosTokenId);
  const vocabSize = r.positiveInt('vocab_size');
  for (const [key, id] of [
    ['pad_token_id', padTokenId],
    ['bos_token_id', bosTokenId],
  ] as const) {
    if (id !== null && id >= vocabSize) r.fail(key, `is ${id}, outside vocab_size ${vocabSize}`);
  }
  // An eos id the model cannot emit would never end a response: every rollout would run to max_response_length.
  const eosTokenIds = r.tokenIds('eos_token_id', defaults.eosTokenId);
  for (const id of eosTokenIds)
    if (id >= vocabSize) r.fail('eos_token_id', `is ${id}, outside vocab_size ${vocabSize}`);

  return {
    architecture,
    family,
    head,
    vocabSize,
    hiddenSize,
    intermediateSize: r.positiveInt('intermediate_size'),
    numLayers,
    numHeads,
    numKvHeads,
    headDim,
    ropeTheta: readRopeTheta(r),
    rmsNormEps: r.positiveNumber('rms_norm_eps', 1e-6),
    tieWordEmbeddings: r.boolean('tie_word_embeddings', false),
    attentionBias: family === 'qwen2' ? true : attentionBiasKey,
    outputBias: family === 'qwen2' ? false : attentionBiasKey,
    qkNorm: family === 'qwen3',
    numLabels: head === 'causal-lm' ? null : readNumLabels(r, architecture),
    padTokenId,
    bosTokenId,
    eosTokenIds,
    maxPositionEmbeddings: r.positiveInt('max_position_embeddings', defaults.maxPositionEmbeddings),
    torchDtype: readTorchDtype(r),
  };
}

/** The same model with another head, e.g. a critic (token-classification) made from an actor checkpoint. */
export function withHead(config: DecoderConfig, head: HeadKind): DecoderConfig {
  return {
    ...config,
    head,
    architecture: architectureName(config.family, head),
    numLabels: head === 'causal-lm' ? null : 1,
  };
}

/**
 * config.json for saving: every key parseHfConfig reads, written explicitly so that parseHfConfig and
 * transformers' AutoConfig both read back exactly this model whatever their defaults.
 */
export function toHfConfig(config: DecoderConfig, architecture = config.architecture): Record<string, unknown> {
  const split = splitArchitecture(architecture);
  if (!split)
    throw new HfConfigError(
      `toHfConfig: unsupported architecture ${architecture} (supported: ${SUPPORTED_ARCHITECTURES.join(', ')})`,
    );
  if (split.family !== config.family)
    throw new HfConfigError(`toHfConfig: a ${config.family} model cannot be saved as ${architecture}`);
  const c = split.head === config.head ? config : withHead(config, split.head);
  if (c.head === 'sequence-classification' && c.padTokenId === null)
    throw new HfConfigError(`toHfConfig: ${architecture} needs padTokenId`);
  if (c.family === 'qwen2' && (!c.attentionBias || c.outputBias))
    throw new HfConfigError('toHfConfig: Qwen2 always has q/k/v bias and no o_proj bias');
  if (c.family !== 'qwen2' && c.attentionBias !== c.outputBias)
    throw new HfConfigError(`toHfConfig: ${c.family} has one attention_bias key for q/k/v and o_proj`);
  if (c.qkNorm !== (c.family === 'qwen3'))
    throw new HfConfigError(`toHfConfig: qkNorm is fixed by the architecture (Qwen3 only)`);

  const out: Record<string, unknown> = {
    architectures: [architecture],
    model_type: c.family,
    vocab_size: c.vocabSize,
    hidden_size: c.hiddenSize,
    intermediate_size: c.intermediateSize,
    num_hidden_layers: c.numLayers,
    num_attention_heads: c.numHeads,
    num_key_value_heads: c.numKvHeads,
    head_dim: c.headDim,
    hidden_act: 'silu',
    max_position_embeddings: c.maxPositionEmbeddings,
    rms_norm_eps: c.rmsNormEps,
    rope_theta: c.ropeTheta,
    rope_scaling: null,
    attention_dropout: 0.0,
    tie_word_embeddings: c.tieWordEmbeddings,
    bos_token_id: c.bosTokenId,
    eos_token_id: c.eosTokenIds.length === 1 ? c.eosTokenIds[0] : c.eosTokenIds,
    pad_token_id: c.padTokenId,
    torch_dtype: c.torchDtype,
  };
  if (c.family !== 'qwen2') out.attention_bias = c.attentionBias;
  if (c.family === 'llama') out.mlp_bias = false;
  else out.use_sliding_window = false;
  if (c.numLabels !== null) {
    out.id2label = { 0: 'LABEL_0' };
    out.label2id = { LABEL_0: 0 };
    // HF's token classifier applies dropout 0.1 by default in train mode; critics train without it (verl
    // sets the same override), and this engine implements none.
    if (c.head === 'token-classification') out.classifier_dropout = 0.0;
  }
  return out;
}
