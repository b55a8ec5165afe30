// Model shapes the project names: the benchmark configs of the foundation issue and the default job's model.
// Each is a Hugging Face config.json, parsed like any checkpoint's, so presets and real models take one path.
import { parseHfConfig, type DecoderConfig } from './hf-config.ts';

function llamaBenchConfig(
  layers: number,
  hidden: number,
  heads: number,
  kvHeads: number,
  intermediate: number,
  vocab: number,
  tie = false,
) {
  return {
    architectures: ['LlamaForCausalLM'],
    model_type: 'llama',
    vocab_size: vocab,
    hidden_size: hidden,
    intermediate_size: intermediate,
    num_hidden_layers: layers,
    num_attention_heads: heads,
    num_key_value_heads: kvHeads,
    head_dim: hidden / heads,
    rms_norm_eps: 1e-6,
    rope_theta: 10000,
    tie_word_embeddings: tie,
    max_position_embeddings: 2048,
  };
}

/** Benchmark "tiny": 4 layers, hidden 128, 4 / 2 heads of 32, SwiGLU 384, vocab 512, untied head. */
export const BENCH_TINY: DecoderConfig = parseHfConfig(llamaBenchConfig(4, 128, 4, 2, 384, 512), 'preset bench-tiny');
/** Benchmark "small": 6 layers, hidden 256, 8 / 4 heads of 32, SwiGLU 768, vocab 2048. */
export const BENCH_SMALL: DecoderConfig = parseHfConfig(
  llamaBenchConfig(6, 256, 8, 4, 768, 2048),
  'preset bench-small',
);

/** Benchmark "gpt2-124m": a Llama of GPT-2 small's size (124M parameters): 12 layers, hidden 768, 12 heads of 64,
 *  SwiGLU 2048 (as many weights as GPT-2's 4×768 GELU MLP), GPT-2's vocabulary padded to 50,304, tied head. */
export const BENCH_GPT2_124M: DecoderConfig = parseHfConfig(
  llamaBenchConfig(12, 768, 12, 12, 2048, 50304, true),
  'preset bench-gpt2-124m',
);

/** The default job's actor: a tiny Qwen3 (q/k norm, tied embeddings) over a character vocabulary. */
export function tinyQwen3Config(
  vocabSize: number,
  overrides: Partial<{
    layers: number;
    hidden: number;
    heads: number;
    kvHeads: number;
    headDim: number;
    intermediate: number;
  }> = {},
): DecoderConfig {
  const o = { layers: 3, hidden: 96, heads: 4, kvHeads: 2, headDim: 24, intermediate: 256, ...overrides };
  return parseHfConfig(
    {
      architectures: ['Qwen3ForCausalLM'],
      model_type: 'qwen3',
      vocab_size: vocabSize,
      hidden_size: o.hidden,
      intermediate_size: o.intermediate,
      num_hidden_layers: o.layers,
      num_attention_heads: o.heads,
      num_key_value_heads: o.kvHeads,
      head_dim: o.headDim,
      rms_norm_eps: 1e-6,
      rope_theta: 10000,
      tie_word_embeddings: true,
      max_position_embeddings: 256,
      bos_token_id: 1,
      eos_token_id: 2,
      pad_token_id: 0,
    },
    'preset tiny-qwen3',
  );
}
