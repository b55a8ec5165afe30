// A Qwen3-shaped checkpoint as Qwen3 ships (bf16 safetensors, tied embeddings, vocabulary 151,936, the real
// tokenizer) made by tools/qwen3-model.ts: it loads, saves back in bf16 (torch_dtype) at half the float32 size or
// in float32 when asked, reloads with the same weights, and its 152K-row LM head gives the same log-probs when the
// embedding is split across bindings (a forced 32 MiB limit: 3 windows of the 78 MB table).
import { describe, it, expect, afterAll } from 'vitest';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gpuEngine } from '../support/gpu-engine.ts';
import { Engine, readKnobs, type Arena } from '../../engine/index.ts';
import { loadModel, saveModel } from '../../models/model-files-node.ts';
import { CheckpointTensors } from '../../models/safetensors-node.ts';
import { loadTokenizer } from '../../models/tokenizer-node.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { uploadTokenBatch } from '../../models/token-batch.ts';
import { writeQwen3Model, QWEN3_TINY_LAYER, QWEN3_VOCAB_SIZE } from '../../tools/qwen3-model.ts';

async function storedDtypes(dir: string): Promise<Set<string>> {
  const tensors = await CheckpointTensors.open(dir);
  try {
    return new Set(tensors.names().map((n) => tensors.info(n)!.dtype));
  } finally {
    await tensors.close();
  }
}

async function arenaValues(engine: Engine, arena: Arena): Promise<Float32Array[]> {
  return Promise.all(arena.buffers.map((b) => engine.read(b)));
}

/** Index of the first differing value, or -1 (vitest's toEqual is far too slow for 20M floats). */
function firstDifference(a: Float32Array[], b: Float32Array[]): number {
  let offset = 0;
  for (let i = 0; i < a.length; i++) {
    if (a[i].length !== b[i].length) return offset;
    for (let j = 0; j < a[i].length; j++) if (!Object.is(a[i][j], b[i][j])) return offset + j;
    offset += a[i].length;
  }
  return a.length === b.length ? -1 : offset;
}

// Heads of 16, not the tiny layer's 32: the size the rest of the suite compiles attention for (a cold shader
// cache would otherwise compile an attention forward for this file alone).
describe('Qwen3-shaped bf16 checkpoint (vocabulary 151,936)', () => {
  let split: Engine | null = null;
  const roots: string[] = [];
  // Each checkpoint directory holds ~100 MB.
  afterAll(async () => {
    split?.destroy();
    for (const root of roots) await rm(root, { recursive: true, force: true });
  });

  it(
    'saves in the dtype it came in (bf16, half the size) or float32 when asked, and reloads the same ' + 'weights',
    async () => {
      const engine = await gpuEngine();
      const root = await mkdtemp(join(tmpdir(), 'qwen3-'));
      roots.push(root);
      const source = join(root, 'source');
      await writeQwen3Model(source, { ...QWEN3_TINY_LAYER, headDim: 16, layers: 1 });
      const model = await loadModel(engine, source);
      expect(model.config).toMatchObject({
        architecture: 'Qwen3ForCausalLM',
        vocabSize: QWEN3_VOCAB_SIZE,
        tieWordEmbeddings: true,
        torchDtype: 'bfloat16',
      });
      expect(await storedDtypes(source)).toEqual(new Set(['BF16']));

      await saveModel(engine, join(root, 'bf16'), model.config, model.params, { tokenizerFrom: source });
      await saveModel(engine, join(root, 'f32'), model.config, model.params, { dtype: 'float32' });
      expect(await storedDtypes(join(root, 'bf16'))).toEqual(new Set(['BF16']));
      expect(await storedDtypes(join(root, 'f32'))).toEqual(new Set(['F32']));
      expect(JSON.parse(await readFile(join(root, 'bf16', 'config.json'), 'utf8')).torch_dtype).toBe('bfloat16');
      expect(JSON.parse(await readFile(join(root, 'f32', 'config.json'), 'utf8')).torch_dtype).toBe('float32');
      const bytes = async (dir: string) => (await stat(join(root, dir, 'model.safetensors'))).size;
      expect(await bytes('bf16')).toBe((await stat(join(source, 'model.safetensors'))).size);
      expect((await bytes('f32')) / (await bytes('bf16'))).toBeCloseTo(2, 3);

      const expected = await arenaValues(engine, model.params);
      for (const dir of ['bf16', 'f32']) {
        const again = await loadModel(engine, join(root, dir));
        expect(again.config.torchDtype).toBe(dir === 'bf16' ? 'bfloat16' : 'float32');
        expect(firstDifference(await arenaValues(engine, again.params), expected)).toBe(-1);
      }
      const tokenizer = await loadTokenizer(join(root, 'bf16'));
      expect((await tokenizer.encode('<|im_start|>user'))[0]).toBe(151644);
    },
  );

  it('the 152K-row LM head gives the same log-probs with its embedding split across bindings', async () => {
    const root = await mkdtemp(join(tmpdir(), 'qwen3-split-'));
    roots.push(root);
    await writeQwen3Model(root, { ...QWEN3_TINY_LAYER, headDim: 16, layers: 1 }, 3);
    split = await Engine.create({ ...readKnobs(), maxBindingBytes: 32 << 20 });
    const inputIds = [
      [151644, 872, 198, 9707, 11, 1879, 0, 151645],
      [151643, 151643, 151644, 77091, 198, 16, 10, 151935],
    ];
    const attentionMask = [
      [1, 1, 1, 1, 1, 1, 1, 1],
      [0, 0, 1, 1, 1, 1, 1, 1],
    ];
    const targets = inputIds.flatMap((row) => [...row.slice(1), 151645]);
    const run = async (engine: Engine) => {
      const { config, params } = await loadModel(engine, root);
      const lm = new CausalLm(engine, config, params);
      const batch = uploadTokenBatch(engine, { inputIds, attentionMask }, config.vocabSize, 'qwen3');
      const out = lm.tokenLogprobs(batch, engine.tensorFrom('targets', [16], targets, 'u32'), {
        saveForBackward: false,
      });
      return {
        logprobs: await engine.read(out.logprobs),
        entropy: await engine.read(out.entropy),
        segments: params.segments.length,
      };
    };
    const whole = await run(await gpuEngine());
    const parts = await run(split);
    expect(whole.segments).toBe(1);
    expect(parts.segments).toBeGreaterThanOrEqual(3);
    for (let i = 0; i < 16; i++) {
      expect(parts.logprobs[i]).toBeCloseTo(whole.logprobs[i], 4);
      expect(parts.entropy[i]).toBeCloseTo(whole.entropy[i], 4);
    }
    // Random weights: every token is about equally likely among 151,936.
    expect(whole.entropy[0]).toBeCloseTo(Math.log(QWEN3_VOCAB_SIZE), 1);
  });
});
