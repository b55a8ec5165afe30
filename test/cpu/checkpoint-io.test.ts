import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile, copyFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openHfCheckpoint, saveHfCheckpoint, type HfCheckpoint } from '../../models/checkpoint-io-node.ts';
import { withHead, type DecoderConfig } from '../../models/hf-config.ts';
import { writeCheckpointTensors, type TensorSource } from '../../models/safetensors-node.ts';
import type { TensorData } from '../../models/safetensors.ts';
import { randomArray } from '../support/arrays.ts';
import { describeWithFixtures, fixturePath } from '../support/fixtures.ts';

const LLAMA = fixturePath('hf/llama-tiny');
const STORIES = fixturePath('hf/stories260K');
const QWEN3_CRITIC = fixturePath('hf/qwen3-critic-tiny');

function bits(a: TensorData): string {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString('hex');
}

async function loadAll(
  dir: string,
  as?: DecoderConfig['head'],
): Promise<{ ck: HfCheckpoint; tensors: TensorSource[] }> {
  const ck = await openHfCheckpoint(dir, { as });
  try {
    const tensors: TensorSource[] = [];
    for (const name of ck.tensors.names())
      tensors.push({ name, shape: ck.tensors.info(name)!.shape, data: await ck.tensors.read(name) });
    return { ck, tensors };
  } finally {
    await ck.tensors.close();
  }
}

function expectSameTensors(actual: TensorSource[], expected: TensorSource[]) {
  const byName = new Map(actual.map((t) => [t.name, t]));
  expect([...byName.keys()].sort()).toEqual(expected.map((t) => t.name).sort());
  for (const t of expected) {
    const a = byName.get(t.name)!;
    expect(a.shape).toEqual(t.shape);
    expect(bits(a.data as TensorData)).toBe(bits(t.data as TensorData));
  }
}

describeWithFixtures('Hugging Face checkpoints (llama-tiny, stories260K)', ['hf/llama-tiny', 'hf/stories260K'], () => {
  let tmp: string;
  let llama: { ck: HfCheckpoint; tensors: TensorSource[] };
  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'checkpoint-io-test-'));
    llama = await loadAll(LLAMA);
  });
  afterAll(async () => {
    await rm(tmp, { recursive: true, force: true });
  });

  /** llama-tiny's backbone plus a small value head: a critic as the trainer would save it. */
  function criticTensors(): { config: DecoderConfig; tensors: TensorSource[] } {
    const config = withHead(llama.ck.config, 'token-classification');
    const tensors = llama.tensors.filter((t) => t.name !== 'lm_head.weight');
    tensors.push({ name: 'score.weight', shape: [1, 64], data: randomArray(64, 7, 0.01) });
    tensors.push({ name: 'score.bias', shape: [1], data: Float32Array.of(0.25) });
    return { config, tensors };
  }

  describe('loading', () => {
    it('llama-tiny: config, tensors checked against it, no generation_config', () => {
      expect(llama.ck.config.architecture).toBe('LlamaForCausalLM');
      expect(llama.ck.generationConfig).toBeNull();
      expect(llama.tensors).toHaveLength(21);
    });

    it('stories260K: generation_config eos ids [2, 1] beside config.json eos 2', async () => {
      const { ck } = await loadAll(STORIES);
      expect(ck.config.eosTokenIds).toEqual([2]);
      expect(ck.generationConfig).toMatchObject({ bosTokenId: 1, eosTokenIds: [2, 1], padTokenId: null });
    });

    it('a causal-LM checkpoint opened as a critic keeps its backbone', async () => {
      const { ck, tensors } = await loadAll(LLAMA, 'token-classification');
      expect(ck.config).toMatchObject({
        architecture: 'LlamaForTokenClassification',
        head: 'token-classification',
        numLabels: 1,
      });
      expect(tensors.map((t) => t.name)).toContain('model.layers.1.mlp.down_proj.weight');
    });

    it('a checkpoint missing a tensor, or with a wrong shape, is rejected naming it', async () => {
      const dir = join(tmp, 'broken');
      await mkdir(dir);
      await copyFile(join(LLAMA, 'config.json'), join(dir, 'config.json'));
      await writeCheckpointTensors(
        dir,
        llama.tensors.filter((t) => t.name !== 'model.norm.weight'),
      );
      await expect(openHfCheckpoint(dir)).rejects.toThrow(
        /broken: LlamaForCausalLM needs tensor 'model\.norm\.weight' \[64\], which the checkpoint does not have/,
      );
      await writeCheckpointTensors(
        dir,
        llama.tensors.map((t) => (t.name === 'model.norm.weight' ? { ...t, shape: [1, 64] } : t)),
      );
      await expect(openHfCheckpoint(dir)).rejects.toThrow(
        /tensor 'model\.norm\.weight' has shape \[1, 64\], config\.json implies \[64\]/,
      );
    });

    it("num_hidden_layers below the checkpoint's layer count is rejected instead of dropping layers", async () => {
      const dir = join(tmp, 'fewer-layers');
      await mkdir(dir);
      const config = JSON.parse(await readFile(join(LLAMA, 'config.json'), 'utf8'));
      await writeFile(join(dir, 'config.json'), JSON.stringify({ ...config, num_hidden_layers: 1 }));
      await writeCheckpointTensors(dir, llama.tensors);
      await expect(openHfCheckpoint(dir)).rejects.toThrow(
        /fewer-layers: the weights hold 2 layers but config\.json num_hidden_layers is 1/,
      );
    });
  });

  describe('saving', () => {
    it('actor: a complete HF directory that loads back bit-identically', async () => {
      const dir = join(tmp, 'actor');
      await saveHfCheckpoint(dir, { config: llama.ck.config, tensors: llama.tensors, tokenizerFrom: STORIES });
      expect((await readdir(dir)).sort()).toEqual([
        'config.json',
        'generation_config.json',
        'model.safetensors',
        'special_tokens_map.json',
        'tokenizer.json',
        'tokenizer_config.json',
      ]);
      expect(await readFile(join(dir, 'tokenizer.json'), 'utf8')).toBe(
        await readFile(join(STORIES, 'tokenizer.json'), 'utf8'),
      );
      const config = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'));
      expect(config).toMatchObject({
        architectures: ['LlamaForCausalLM'],
        model_type: 'llama',
        torch_dtype: 'float32',
        tie_word_embeddings: false,
      });
      expect(JSON.parse(await readFile(join(dir, 'generation_config.json'), 'utf8'))).toEqual({
        bos_token_id: 1,
        eos_token_id: 2,
        pad_token_id: null,
      });
      const back = await loadAll(dir);
      expect(back.ck.config).toEqual(llama.ck.config);
      expectSameTensors(back.tensors, llama.tensors);
    });

    it('critic: ForTokenClassification with score.weight and score.bias, bit-identical round trip', async () => {
      const dir = join(tmp, 'critic');
      const { config, tensors } = criticTensors();
      await saveHfCheckpoint(dir, { config, tensors });
      expect((await readdir(dir)).sort()).toEqual(['config.json', 'model.safetensors']);
      const json = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'));
      expect(json).toMatchObject({
        architectures: ['LlamaForTokenClassification'],
        id2label: { 0: 'LABEL_0' },
        label2id: { LABEL_0: 0 },
      });
      const back = await loadAll(dir);
      expect(back.ck.config).toEqual(config);
      expectSameTensors(back.tensors, tensors);
    });

    it('sharded save: shards plus index, bit-identical', async () => {
      const dir = join(tmp, 'sharded');
      await saveHfCheckpoint(dir, {
        config: llama.ck.config,
        tensors: llama.tensors,
        generationConfig: { eos_token_id: [2, 1], do_sample: true },
        maxShardBytes: 150_000,
      });
      const files = await readdir(dir);
      expect(files).toContain('model.safetensors.index.json');
      expect(files.filter((f) => /^model-\d{5}-of-\d{5}\.safetensors$/.test(f)).length).toBeGreaterThan(1);
      const back = await loadAll(dir);
      expect(back.ck.generationConfig?.raw).toEqual({ eos_token_id: [2, 1], do_sample: true });
      expectSameTensors(back.tensors, llama.tensors);
    });

    it('replaces an existing checkpoint, leaving no temporary directories', async () => {
      const dir = join(tmp, 'replace');
      await saveHfCheckpoint(dir, { config: llama.ck.config, tensors: llama.tensors });
      const { config, tensors } = criticTensors();
      await saveHfCheckpoint(dir, { config, tensors });
      expect((await loadAll(dir)).ck.config.head).toBe('token-classification');
      expect((await readdir(tmp)).filter((f) => f.includes('replace'))).toEqual(['replace']);
    });

    it('an interrupted save leaves the previous checkpoint intact and cleans up', async () => {
      const dir = join(tmp, 'interrupted');
      await saveHfCheckpoint(dir, { config: llama.ck.config, tensors: llama.tensors });
      const failing = llama.tensors.map((t, i) =>
        i === 10
          ? {
              ...t,
              data: () => {
                throw new Error('device lost while reading weights');
              },
            }
          : t,
      );
      await expect(saveHfCheckpoint(dir, { config: llama.ck.config, tensors: failing })).rejects.toThrow(/device lost/);
      const back = await loadAll(dir);
      expectSameTensors(back.tensors, llama.tensors);
      expect((await readdir(tmp)).filter((f) => f.includes('interrupted'))).toEqual(['interrupted']);
    });

    it('refuses to replace a directory that is not a checkpoint', async () => {
      const dir = join(tmp, 'outputs');
      await mkdir(dir);
      await writeFile(join(dir, 'notes.txt'), 'keep me');
      await expect(saveHfCheckpoint(dir, { config: llama.ck.config, tensors: llama.tensors })).rejects.toThrow(
        /outputs: exists, is not empty and holds no config\.json; refusing to replace it/,
      );
      expect(await readFile(join(dir, 'notes.txt'), 'utf8')).toBe('keep me');
    });

    it('refuses tensor sets transformers could not load', async () => {
      const config = llama.ck.config;
      const target = join(tmp, 'never');
      await expect(saveHfCheckpoint(target, { config, tensors: llama.tensors.slice(1) })).rejects.toThrow(
        /LlamaForCausalLM needs tensors that were not given: lm_head\.weight/,
      );
      await expect(
        saveHfCheckpoint(target, {
          config,
          tensors: [...llama.tensors, { name: 'score.bias', shape: [1], data: new Float32Array(1) }],
        }),
      ).rejects.toThrow(/tensor 'score\.bias' is not part of LlamaForCausalLM/);
      await expect(
        saveHfCheckpoint(target, {
          config,
          tensors: llama.tensors.map((t) => (t.name === 'model.norm.weight' ? { ...t, shape: [32, 2] } : t)),
        }),
      ).rejects.toThrow(/tensor 'model\.norm\.weight' has shape \[32, 2\], LlamaForCausalLM needs \[64\]/);
      expect((await readdir(tmp)).some((f) => f.includes('never'))).toBe(false);
    });
  });
});

describeWithFixtures('a Qwen3 critic transformers saved (qwen3-critic-tiny)', ['hf/qwen3-critic-tiny'], () => {
  let tmp: string;
  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'checkpoint-io-critic-'));
  });
  afterAll(async () => {
    await rm(tmp, { recursive: true, force: true });
  });

  it('loads as a critic and saves a directory that loads back to the same config and bits', async () => {
    const original = await loadAll(QWEN3_CRITIC);
    expect(original.ck.config).toMatchObject({
      architecture: 'Qwen3ForTokenClassification',
      head: 'token-classification',
      numLabels: 1,
      headDim: 32,
      qkNorm: true,
      tieWordEmbeddings: true,
    });
    const names = original.tensors.map((t) => t.name);
    expect(names).toEqual(
      expect.arrayContaining(['score.weight', 'score.bias', 'model.layers.1.self_attn.k_norm.weight']),
    );
    expect(names).not.toContain('lm_head.weight');

    const dir = join(tmp, 'critic');
    await saveHfCheckpoint(dir, { config: original.ck.config, tensors: original.tensors });
    // What transformers reads to build Qwen3ForTokenClassification again, as the fixture's own config.json says it.
    const fixture = JSON.parse(await readFile(join(QWEN3_CRITIC, 'config.json'), 'utf8'));
    const saved = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'));
    for (const key of [
      'architectures',
      'model_type',
      'id2label',
      'label2id',
      'head_dim',
      'hidden_size',
      'intermediate_size',
      'num_attention_heads',
      'num_key_value_heads',
      'num_hidden_layers',
      'rms_norm_eps',
      'rope_theta',
      'tie_word_embeddings',
      'torch_dtype',
      'vocab_size',
    ])
      expect(saved[key], key).toEqual(fixture[key]);
    const back = await loadAll(dir);
    expect(back.ck.config).toEqual(original.ck.config);
    expectSameTensors(back.tensors, original.tensors);
  });
});
