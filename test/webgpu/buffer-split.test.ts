// Tensors larger than the device's largest buffer (maxBufferSize; 256 MiB by default, below Qwen3-0.6B's 622 MB
// embedding) are split across buffers on whole rows, never refused: an engine that pretends its largest buffer is
// 32 KiB (WEBGPU_MAX_BUFFER_BYTES) keeps the small Qwen3's 1000-row embedding — also its tied LM head — its
// gradient and both AdamW moments in 4 buffers each, and must give exactly what the engine with one buffer per
// tensor gives: the same bits of log-probs, entropies, full logits, gradients, the AdamW step, the saved checkpoint
// and optimizer state, and a bf16 frozen copy. Both engines bind at most 16 KiB, so the LM head's vocabulary chunks
// and the embedding's windows fall on the same rows and the arithmetic is the same, not merely close.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, expect, afterAll } from 'vitest';
import {
  SPLIT_BUFFER_BYTES,
  SPLIT_BYTES,
  randomSplitModelParameters,
  runSplitModel,
  splitModelConfig as config,
  type SplitModelOutputs,
} from '../support/split-model.ts';
import { expectSameBits, expectSameTensorBits } from '../support/arrays.ts';
import { Engine, readKnobs, type Arena } from '../../engine/index.ts';
import { frozenParameterCopy } from '../../models/parameter-store.ts';
import { loadModel, saveModel } from '../../models/model-files-node.ts';
import { SINGLE_FILE } from '../../models/safetensors.ts';
import { encodeOptimizerState } from '../../ppo/training/optimizer-state.ts';
import { embeddingForward } from '../../kernels/layers/embedding.ts';
import { matmul } from '../../kernels/matmul/matmul.ts';
import { transpose } from '../../kernels/util/transpose.ts';

const EMBEDDING = 'model.embed_tokens.weight';

async function readAll(engine: Engine, arena: Arena): Promise<Map<string, Float32Array>> {
  const values = new Map<string, Float32Array>();
  for (const name of arena.names()) values.set(name, await engine.read(arena.get(name)));
  return values;
}

describe('tensors larger than one buffer', () => {
  const values = randomSplitModelParameters();
  const engines: Engine[] = [];
  const dirs: string[] = [];
  let whole: { engine: Engine; out: SplitModelOutputs };
  let split: { engine: Engine; out: SplitModelOutputs };
  afterAll(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
    for (const engine of engines) engine.destroy();
  });
  const engineWith = async (maxBufferBytes: number | null) => {
    const engine = await Engine.create({ ...readKnobs(), maxBindingBytes: SPLIT_BYTES, maxBufferBytes });
    engines.push(engine);
    return engine;
  };

  it('a 32 KiB largest buffer splits the embedding, its gradient and moments into 4 buffers; no bit changes', async () => {
    const wholeEngine = await engineWith(null);
    const splitEngine = await engineWith(SPLIT_BUFFER_BYTES);
    expect(splitEngine.caps.maxBufferSize).toBe(SPLIT_BUFFER_BYTES);
    whole = { engine: wholeEngine, out: await runSplitModel(wholeEngine, values) };
    split = { engine: splitEngine, out: await runSplitModel(splitEngine, values) };

    // 1000 rows of 128 bytes: parts of 256 rows (32 KiB), each bound as two 16 KiB windows.
    const { layout } = split.out.params;
    const slot = layout.slots.find((s) => s.name === EMBEDDING)!;
    expect(slot.parts.map((p) => [p.firstRow, p.rows])).toEqual([
      [0, 256],
      [256, 256],
      [512, 256],
      [768, 232],
    ]);
    for (const part of slot.parts) expect(layout.segments.filter((s) => s.buffer === part.buffer)).toHaveLength(2);
    expect(split.out.params.get(EMBEDDING).parts).toHaveLength(4);
    expect(split.out.optimizer.grads.get(EMBEDDING).parts).toHaveLength(4);
    expect(whole.out.params.get(EMBEDDING).parts).toHaveLength(1);
    expect(Math.max(...split.out.params.buffers.map((b) => b.byteLength))).toBeLessThanOrEqual(SPLIT_BUFFER_BYTES);

    expectSameBits(split.out.logprobs, whole.out.logprobs, 'log-probs');
    expectSameBits(split.out.entropy, whole.out.entropy, 'entropies');
    expectSameBits(split.out.logits, whole.out.logits, 'full logits');
    expect(await split.out.optimizer.gradNorm()).toBe(await whole.out.optimizer.gradNorm());
    expectSameTensorBits(split.out.grads, whole.out.grads, 'gradients');
    expectSameTensorBits(split.out.updated, whole.out.updated, 'parameters after AdamW');
  });

  it('saves the same checkpoint and optimizer state, and loads either engine’s checkpoint into split buffers', async () => {
    const save = async ({ engine, out }: typeof whole) => {
      const dir = await mkdtemp(join(tmpdir(), 'buffer-split-'));
      dirs.push(dir);
      await saveModel(engine, dir, config, out.params);
      return { dir, state: await out.optimizer.saveState() };
    };
    const [fromWhole, fromSplit] = [await save(whole), await save(split)];
    const sameBytes = (a: Uint8Array, b: Uint8Array) => Buffer.compare(a, b) === 0;
    expect(
      sameBytes(await readFile(join(fromSplit.dir, SINGLE_FILE)), await readFile(join(fromWhole.dir, SINGLE_FILE))),
    ).toBe(true);
    expect(sameBytes(encodeOptimizerState(fromSplit.state), encodeOptimizerState(fromWhole.state))).toBe(true);
    for (const moments of ['m', 'v'] as const)
      expect(
        fromWhole.state[moments].get(EMBEDDING)!.some((x) => x !== 0),
        `${moments} is nonzero`,
      ).toBe(true);

    const loaded = await loadModel(split.engine, fromWhole.dir, { label: 'reloaded' });
    expect(loaded.params.get(EMBEDDING).parts).toHaveLength(4);
    expectSameTensorBits(await readAll(split.engine, loaded.params), whole.out.updated, 'loaded parameters');
    split.out.optimizer.loadState(fromWhole.state);
    const reloaded = await split.out.optimizer.saveState();
    expect(reloaded.step).toBe(fromWhole.state.step);
    expectSameTensorBits(reloaded.m, fromWhole.state.m, 'reloaded first moments');
    expectSameTensorBits(reloaded.v, fromWhole.state.v, 'reloaded second moments');
  });

  it('a bf16 frozen copy splits at the float32 rows and converts part by part to the same bits', async () => {
    const copies = await Promise.all(
      [whole, split].map(async ({ engine, out }) => {
        const copy = frozenParameterCopy(engine, config, out.params, 'frozen', 'bf16');
        return { copy, values: await readAll(engine, copy) };
      }),
    );
    expect(copies[1].copy.layout.slots.find((s) => s.name === EMBEDDING)!.parts.map((p) => p.rows)).toEqual([
      256, 256, 256, 232,
    ]);
    expect(copies[1].copy.get(EMBEDDING).dtype).toBe('bf16');
    expectSameTensorBits(copies[1].values, copies[0].values, 'bf16 copy');
  });

  it('matmul by a weight split across buffers takes windows within its parts: the unsplit bits', async () => {
    const hidden = Array.from({ length: 2 * 32 }, (_, i) => Math.sin(i));
    const product = async ({ engine, out }: typeof whole) => {
      const logits = engine.tensor('logits', [2, 1000]);
      const a = engine.tensorFrom('hidden', [2, 32], hidden);
      matmul(engine, { a, b: out.params.get(EMBEDDING), out: logits, M: 2, N: 1000, K: 32, layout: 'nt' });
      return engine.read(logits);
    };
    expectSameBits(await product(split), await product(whole), 'hidden · embeddingᵀ');
  });

  it('a kernel that binds a split tensor whole, and a view across its parts, are errors naming the tensor', () => {
    const engine = split.engine;
    const table = split.out.params.get(EMBEDDING);
    const out = engine.tensor('out', [1, 32]);
    const ids = engine.tensorFrom('ids', [1], [3], 'u32');
    // The launcher binds windows: fine. A view of rows 250..260 crosses the first part's end at row 256.
    embeddingForward(engine, { ids, table, out, N: 1, V: 1000, C: 32 });
    // transpose binds its input whole (it meets no tensor that large: layer weights above a binding are not
    // transposed, models/transposed-weights.ts). Its output is the table too: no buffer of this engine holds a
    // [32, 1000] one, and the binding check throws before anything runs.
    expect(() => transpose(engine, { x: table, out: table, rows: 1000, cols: 32 })).toThrow(
      /kernel transpose.*binding x \(tensor split-test:model.embed_tokens.weight, \[1000, 32\]\) lies in 4 buffers/,
    );
    expect(() => table.view('rows', 250 * 32, [10, 32])).toThrow(
      'tensor split-test:model.embed_tokens.weight: view rows (elements 8000 to 8320) crosses the buffers the ' +
        'tensor is split across (maxBufferSize); take it part by part',
    );
  });
});
