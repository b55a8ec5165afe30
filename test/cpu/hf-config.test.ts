import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import {
  parseHfConfig,
  toHfConfig,
  withHead,
  SUPPORTED_ARCHITECTURES,
  type DecoderConfig,
} from '../../models/hf-config.ts';
import { checkpointTensorShapes } from '../../models/parameter-layout.ts';
import { parseSafetensors } from '../../models/safetensors.ts';
import { describeWithFixtures, fixturePath, readFixtureJson } from '../support/fixtures.ts';

const LLAMA_CONFIG = 'hf/llama-tiny/config.json';
const STORIES_CONFIG = 'hf/stories260K/config.json';

// Shapes of published configs (Qwen2.5-0.5B-Instruct, Qwen3-4B), keys as transformers writes them.
const qwen2Json = {
  architectures: ['Qwen2ForCausalLM'],
  model_type: 'qwen2',
  attention_dropout: 0.0,
  bos_token_id: 151643,
  eos_token_id: 151645,
  hidden_act: 'silu',
  hidden_size: 896,
  intermediate_size: 4864,
  max_position_embeddings: 32768,
  max_window_layers: 21,
  num_attention_heads: 14,
  num_hidden_layers: 24,
  num_key_value_heads: 2,
  rms_norm_eps: 1e-6,
  rope_scaling: null,
  rope_theta: 1000000.0,
  sliding_window: 32768,
  tie_word_embeddings: true,
  torch_dtype: 'bfloat16',
  use_cache: true,
  use_sliding_window: false,
  vocab_size: 151936,
};
const qwen3Json = {
  architectures: ['Qwen3ForCausalLM'],
  model_type: 'qwen3',
  attention_bias: false,
  attention_dropout: 0.0,
  bos_token_id: 151643,
  eos_token_id: 151645,
  head_dim: 128,
  hidden_act: 'silu',
  hidden_size: 2560,
  intermediate_size: 9728,
  max_position_embeddings: 262144,
  max_window_layers: 36,
  num_attention_heads: 32,
  num_hidden_layers: 36,
  num_key_value_heads: 8,
  rms_norm_eps: 1e-6,
  rope_scaling: null,
  rope_theta: 5000000,
  sliding_window: null,
  tie_word_embeddings: true,
  use_sliding_window: false,
  vocab_size: 151936,
};

describeWithFixtures("parsing the fixtures' config.json", [LLAMA_CONFIG, STORIES_CONFIG], () => {
  it('llama-tiny and stories260K fixtures', () => {
    expect(parseHfConfig(readFixtureJson(LLAMA_CONFIG))).toEqual({
      architecture: 'LlamaForCausalLM',
      family: 'llama',
      head: 'causal-lm',
      vocabSize: 256,
      hiddenSize: 64,
      intermediateSize: 160,
      numLayers: 2,
      numHeads: 4,
      numKvHeads: 2,
      headDim: 16,
      ropeTheta: 10000,
      rmsNormEps: 1e-6,
      tieWordEmbeddings: false,
      attentionBias: false,
      outputBias: false,
      qkNorm: false,
      numLabels: null,
      padTokenId: null,
      bosTokenId: 1,
      eosTokenIds: [2],
      maxPositionEmbeddings: 128,
      torchDtype: 'float32',
    } satisfies DecoderConfig);
    const stories = parseHfConfig(readFileSync(fixturePath(STORIES_CONFIG), 'utf8'));
    expect(stories).toMatchObject({
      vocabSize: 512,
      numLayers: 5,
      numHeads: 8,
      numKvHeads: 4,
      headDim: 8,
      intermediateSize: 172,
      rmsNormEps: 1e-5,
      tieWordEmbeddings: true,
      padTokenId: null,
    });
  });

  it('token ids: absent takes the class default, explicit null means none, lists kept', () => {
    const { bos_token_id: _b, eos_token_id: _e, ...llamaNoIds } = readFixtureJson(LLAMA_CONFIG);
    expect(parseHfConfig(llamaNoIds)).toMatchObject({ bosTokenId: 1, eosTokenIds: [2] });
    expect(parseHfConfig({ ...llamaNoIds, bos_token_id: null, eos_token_id: null })).toMatchObject({
      bosTokenId: null,
      eosTokenIds: [],
    });
    expect(parseHfConfig({ ...llamaNoIds, eos_token_id: [2, 1] }).eosTokenIds).toEqual([2, 1]);
  });
});

// transformers' own tiny Qwen2, Qwen3 and Qwen3 critic (hf/<model>): each config parses to what the architecture
// means, and the tensors the engine expects are exactly those transformers saved, with their shapes.
const QWEN_FIXTURES = {
  'qwen2-tiny': { architecture: 'Qwen2ForCausalLM', attentionBias: true, qkNorm: false, headDim: 16, numLabels: null },
  'qwen3-tiny': { architecture: 'Qwen3ForCausalLM', attentionBias: false, qkNorm: true, headDim: 32, numLabels: null },
  'qwen3-critic-tiny': {
    architecture: 'Qwen3ForTokenClassification',
    head: 'token-classification',
    attentionBias: false,
    qkNorm: true,
    headDim: 32,
    numLabels: 1,
  },
} as const;

for (const [model, expected] of Object.entries(QWEN_FIXTURES)) {
  const files = [`hf/${model}/config.json`, `hf/${model}/model.safetensors`];
  describeWithFixtures(`parsing ${model}'s config.json`, files, () => {
    it('its architecture, and the tensors transformers saved with their shapes', () => {
      const c = parseHfConfig(readFixtureJson(files[0]));
      expect(c).toMatchObject({ ...expected, hiddenSize: 64, numHeads: 4, numKvHeads: 2, tieWordEmbeddings: true });
      const saved = parseSafetensors(new Uint8Array(readFileSync(fixturePath(files[1]))), files[1]).header.tensors;
      expect(new Map(saved.map((t) => [t.name, [...t.shape]]))).toEqual(checkpointTensorShapes(c));
    });
  });
}

describe('parsing config.json', () => {
  it('Qwen2: q/k/v bias hard-coded, no o_proj bias, head_dim from hidden/heads', () => {
    const c = parseHfConfig(qwen2Json);
    expect(c).toMatchObject({
      family: 'qwen2',
      head: 'causal-lm',
      headDim: 64,
      numKvHeads: 2,
      attentionBias: true,
      outputBias: false,
      qkNorm: false,
      tieWordEmbeddings: true,
      ropeTheta: 1e6,
      eosTokenIds: [151645],
      bosTokenId: 151643,
    });
    const shapes = checkpointTensorShapes(c);
    expect(shapes.get('model.layers.3.self_attn.k_proj.bias')).toEqual([128]);
    expect(shapes.has('model.layers.3.self_attn.o_proj.bias')).toBe(false);
    expect(shapes.has('lm_head.weight')).toBe(false);
  });

  it('Qwen3: decoupled head_dim, q_norm/k_norm, default head_dim 128 when absent', () => {
    const c = parseHfConfig(qwen3Json);
    expect(c).toMatchObject({
      family: 'qwen3',
      headDim: 128,
      hiddenSize: 2560,
      numHeads: 32,
      qkNorm: true,
      attentionBias: false,
      outputBias: false,
    });
    const shapes = checkpointTensorShapes(c);
    expect(shapes.get('model.layers.0.self_attn.q_proj.weight')).toEqual([32 * 128, 2560]);
    expect(shapes.get('model.layers.0.self_attn.o_proj.weight')).toEqual([2560, 32 * 128]);
    expect(shapes.get('model.layers.0.self_attn.k_norm.weight')).toEqual([128]);
    const { head_dim: _, ...noHeadDim } = {
      ...qwen3Json,
      hidden_size: 64,
      num_attention_heads: 4,
      num_key_value_heads: 2,
    };
    expect(parseHfConfig(noHeadDim).headDim).toBe(128);
    expect(parseHfConfig({ ...qwen3Json, attention_bias: true })).toMatchObject({
      attentionBias: true,
      outputBias: true,
    });
  });

  it('torch_dtype (transformers 5: dtype) is kept so a checkpoint saves in the dtype it came in', () => {
    expect(parseHfConfig(qwen2Json).torchDtype).toBe('bfloat16');
    expect(toHfConfig(parseHfConfig(qwen2Json)).torch_dtype).toBe('bfloat16');
    expect(parseHfConfig(qwen3Json).torchDtype).toBe('float32');
    expect(parseHfConfig({ ...qwen3Json, dtype: 'float16' }).torchDtype).toBe('float16');
    expect(() => parseHfConfig({ ...qwen2Json, torch_dtype: 'float64' })).toThrow(
      /torch_dtype.*"float64", expected one of float32, bfloat16, float16/,
    );
  });

  it('critic (token classification) and reward model (sequence classification) heads', () => {
    const critic = parseHfConfig({
      ...qwen3Json,
      architectures: ['Qwen3ForTokenClassification'],
      id2label: { 0: 'LABEL_0' },
      label2id: { LABEL_0: 0 },
    });
    expect(critic).toMatchObject({ head: 'token-classification', numLabels: 1 });
    expect(checkpointTensorShapes(critic).get('score.weight')).toEqual([1, 2560]);
    expect(checkpointTensorShapes(critic).get('score.bias')).toEqual([1]);
    expect(checkpointTensorShapes(critic).has('lm_head.weight')).toBe(false);
    const reward = parseHfConfig({
      ...qwen2Json,
      architectures: ['Qwen2ForSequenceClassification'],
      num_labels: 1,
      pad_token_id: 151643,
    });
    expect(reward).toMatchObject({ head: 'sequence-classification', numLabels: 1, padTokenId: 151643 });
    expect(checkpointTensorShapes(reward).get('score.weight')).toEqual([1, 896]);
    expect(checkpointTensorShapes(reward).has('score.bias')).toBe(false);
  });

  it('accepts what is equivalent to plain full attention', () => {
    expect(() => parseHfConfig({ ...qwen2Json, rope_scaling: { rope_type: 'default' } })).not.toThrow();
    // Enabled, but every layer is below max_window_layers: no layer uses the window (as in HF).
    expect(() => parseHfConfig({ ...qwen2Json, use_sliding_window: true, max_window_layers: 24 })).not.toThrow();
    expect(() => parseHfConfig({ ...qwen2Json, layer_types: Array(24).fill('full_attention') })).not.toThrow();
    expect(
      parseHfConfig({
        ...qwen3Json,
        rope_theta: undefined,
        rope_parameters: { rope_type: 'default', rope_theta: 1234 },
      }).ropeTheta,
    ).toBe(1234);
    expect(parseHfConfig({ ...qwen2Json, hidden_act: 'swish' }).family).toBe('qwen2');
  });
});

describeWithFixtures('saving: toHfConfig round-trips every field', [LLAMA_CONFIG], () => {
  const llama = parseHfConfig(readFixtureJson(LLAMA_CONFIG));
  const qwen2 = parseHfConfig(qwen2Json);
  const qwen3 = parseHfConfig(qwen3Json);
  const configs: DecoderConfig[] = [
    llama,
    qwen2,
    qwen3,
    { ...qwen2, padTokenId: 151643 },
    withHead(llama, 'token-classification'),
    withHead(qwen3, 'token-classification'),
    withHead({ ...qwen2, padTokenId: 151643 }, 'sequence-classification'),
    {
      ...llama,
      eosTokenIds: [2, 1],
      bosTokenId: null,
      ropeTheta: 500000,
      headDim: 32,
      attentionBias: true,
      outputBias: true,
    },
  ];
  it.each(configs.map((c) => [c.architecture, c] as const))('%s', (_, c) => {
    const json = toHfConfig(c);
    expect(parseHfConfig(JSON.parse(JSON.stringify(json)))).toEqual(c);
    expect(json.architectures).toEqual([c.architecture]);
  });

  it('a critic saved from an actor config is a ForTokenClassification with one label and no dropout', () => {
    const json = toHfConfig(qwen3, 'Qwen3ForTokenClassification');
    expect(json).toMatchObject({
      architectures: ['Qwen3ForTokenClassification'],
      model_type: 'qwen3',
      id2label: { 0: 'LABEL_0' },
      classifier_dropout: 0.0,
      head_dim: 128,
    });
    expect(parseHfConfig(json)).toEqual(withHead(qwen3, 'token-classification'));
  });

  it('refuses inconsistent requests', () => {
    expect(() => toHfConfig(llama, 'Qwen2ForCausalLM')).toThrow(/a llama model cannot be saved as Qwen2ForCausalLM/);
    expect(() => toHfConfig(llama, 'GPT2LMHeadModel')).toThrow(/unsupported architecture GPT2LMHeadModel/);
    expect(() => toHfConfig(qwen2, 'Qwen2ForSequenceClassification')).toThrow(/needs padTokenId/);
    expect(() => toHfConfig({ ...llama, outputBias: true })).toThrow(/one attention_bias key/);
  });

  it('knows all nine architectures', () => {
    expect(SUPPORTED_ARCHITECTURES).toHaveLength(9);
    expect(SUPPORTED_ARCHITECTURES).toContain('LlamaForSequenceClassification');
  });
});

describeWithFixtures(
  'malformed or unsupported config.json: each its own error naming the file and key',
  [LLAMA_CONFIG],
  () => {
    const base = readFixtureJson(LLAMA_CONFIG);
    const parse = (json: unknown) => () => parseHfConfig(json, 'm/config.json');
    const without = (key: string) => Object.fromEntries(Object.entries(base).filter(([k]) => k !== key));

    it('not JSON, or not an object', () => {
      expect(() => parseHfConfig('{"architectures": [', 'm/config.json')).toThrow(/m\/config\.json: not valid JSON/);
      expect(parse([1])).toThrow(/m\/config\.json: expected a JSON object/);
    });
    it.each(['vocab_size', 'hidden_size', 'intermediate_size', 'num_hidden_layers', 'num_attention_heads'])(
      'missing required %s',
      (key) => {
        expect(parse(without(key))).toThrow(new RegExp(`m/config\\.json: '${key}' is missing \\(required\\)`));
      },
    );
    it('a required key of the wrong type', () => {
      expect(parse({ ...base, hidden_size: '64' })).toThrow(/'hidden_size' is "64", expected a positive integer/);
      expect(parse({ ...base, rms_norm_eps: -1 })).toThrow(/'rms_norm_eps' is -1, expected a positive number/);
      expect(parse({ ...base, tie_word_embeddings: 'yes' })).toThrow(
        /'tie_word_embeddings' is "yes", expected true or false/,
      );
    });
    it('missing or unsupported architecture', () => {
      expect(parse(without('architectures'))).toThrow(/'architectures' is missing \(required: one of LlamaForCausalLM/);
      expect(parse({ ...base, architectures: ['MistralForCausalLM'] })).toThrow(
        /'architectures' names unsupported architecture MistralForCausalLM/,
      );
      expect(parse({ ...base, architectures: ['LlamaForCausalLM', 'LlamaForTokenClassification'] })).toThrow(
        /expected a list of exactly one class name/,
      );
      expect(parse({ ...base, model_type: 'qwen2' })).toThrow(
        /'model_type' is "qwen2", but architecture LlamaForCausalLM needs 'llama'/,
      );
    });
    it('rope_scaling of a type that is not implemented', () => {
      expect(parse({ ...base, rope_scaling: { rope_type: 'llama3', factor: 8 } })).toThrow(
        /'rope_scaling' has type "llama3"; only plain RoPE/,
      );
      expect(parse({ ...base, rope_scaling: { type: 'linear', factor: 2 } })).toThrow(
        /'rope_scaling' has type "linear"/,
      );
      expect(parse({ ...base, rope_parameters: { rope_type: 'yarn' } })).toThrow(/'rope_parameters' has type "yarn"/);
    });
    it('sliding-window attention actually in use', () => {
      expect(() => parseHfConfig({ ...qwen2Json, use_sliding_window: true }, 'q/config.json')).toThrow(
        /q\/config\.json: 'use_sliding_window' is true and layers 21\.\.23 would use a sliding window of 32768/,
      );
      expect(() =>
        parseHfConfig({ ...qwen3Json, layer_types: [...Array(35).fill('full_attention'), 'sliding_attention'] }),
      ).toThrow(/'layer_types' gives layer 35 "sliding_attention"/);
    });
    it('activations, biases and dropout that are not implemented', () => {
      expect(parse({ ...base, hidden_act: 'gelu' })).toThrow(/'hidden_act' is "gelu"; only silu is implemented/);
      expect(parse({ ...base, mlp_bias: true })).toThrow(/'mlp_bias' is true/);
      expect(parse({ ...base, attention_dropout: 0.1 })).toThrow(
        /'attention_dropout' is 0\.1; attention dropout is not implemented/,
      );
    });
    it('inconsistent head counts', () => {
      expect(parse({ ...base, num_key_value_heads: 3 })).toThrow(
        /'num_key_value_heads' is 3, which does not divide num_attention_heads 4/,
      );
      expect(parse({ ...base, head_dim: 15 })).toThrow(/'head_dim' is 15; RoPE rotates pairs/);
      expect(parse({ ...without('head_dim'), hidden_size: 66 })).toThrow(
        /'hidden_size' 66 is not divisible by num_attention_heads 4/,
      );
    });
    it('a value or reward head without exactly one label', () => {
      expect(parse({ ...base, architectures: ['LlamaForTokenClassification'] })).toThrow(
        /'id2label' gives 2 labels \(from the transformers default\); LlamaForTokenClassification .* needs exactly 1/,
      );
      expect(
        parse({ ...base, architectures: ['LlamaForTokenClassification'], id2label: { 0: 'a', 1: 'b', 2: 'c' } }),
      ).toThrow(/'id2label' gives 3 labels \(from id2label\)/);
    });
    it('a reward model without pad_token_id', () => {
      expect(parse({ ...base, architectures: ['LlamaForSequenceClassification'], num_labels: 1 })).toThrow(
        /'pad_token_id' is missing; LlamaForSequenceClassification reads the score at the rightmost non-pad token/,
      );
    });
    it('token ids outside the vocabulary or not integers', () => {
      expect(parse({ ...base, pad_token_id: 256 })).toThrow(/'pad_token_id' is 256, outside vocab_size 256/);
      expect(parse({ ...base, eos_token_id: 999999 })).toThrow(/'eos_token_id' is 999999, outside vocab_size 256/);
      expect(parse({ ...base, eos_token_id: [2, 256] })).toThrow(/'eos_token_id' is 256, outside vocab_size 256/);
      expect(parse({ ...base, eos_token_id: [2, 'x'] })).toThrow(
        /'eos_token_id' is \[2,"x"\], expected a token id or a list of them/,
      );
    });
  },
);
