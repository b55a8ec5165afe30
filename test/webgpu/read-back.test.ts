// engine.readAll: tensors of every dtype (a split tensor, an odd count of halves, a view at an offset) read back as
// one read-back equal what each read() gives and what was uploaded; a staging buffer kept for the next read of its
// size carries no stale values into it.
import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { Tensor } from '../../engine/index.ts';

describe('engine.readAll', () => {
  it('reads several tensors in one read-back, each as read() reads it', async () => {
    const engine = await gpuEngine();
    const f32 = engine.tensorFrom('f32', [5], [1.5, -2, 3.25, 0, 1e-7]);
    const u32 = engine.tensorFrom('u32', [3], [7, 0, 4_000_000_000], 'u32');
    const i32 = engine.tensorFrom('i32', [2], [-5, 9], 'i32');
    // 3 halves: 6 bytes, padded to 8 in the staging buffer; the next tensor starts at a word.
    const bf16 = engine.tensorFrom('bf16', [3], [1, -0.5, 3], 'bf16');
    const f16 = engine.tensorFrom('f16', [1], [0.25], 'f16');
    const parts = [engine.tensorFrom('part0', [2], [10, 11]), engine.tensorFrom('part1', [3], [12, 13, 14])];
    const split = Tensor.split('split', [5], parts);
    const base = engine.tensorFrom('base', [6], [0, 1, 2, 3, 4, 5]);
    const view = base.view('base[2:5]', 2, [3]);
    const tensors = [f32, u32, i32, bf16, f16, split, view];
    const readbacks = engine.transfers.readbacks;
    const together = await engine.readAll(tensors);
    expect(engine.transfers.readbacks - readbacks).toBe(1);
    const alone = [];
    for (const t of tensors) alone.push(await engine.read(t));
    expect(together).toEqual(alone);
    expect(together.map((v) => Array.from(v))).toEqual([
      [1.5, -2, 3.25, 0, Math.fround(1e-7)],
      [7, 0, 4_000_000_000],
      [-5, 9],
      [1, -0.5, 3],
      [0.25],
      [10, 11, 12, 13, 14],
      [2, 3, 4],
    ]);
    expect(together.map((v) => v.constructor.name)).toEqual([
      'Float32Array',
      'Uint32Array',
      'Int32Array',
      'Float32Array',
      'Float32Array',
      'Float32Array',
      'Float32Array',
    ]);
  });

  it('a read of the same size after another (a kept staging buffer) sees the new values, awaited later or not', async () => {
    const engine = await gpuEngine();
    const t = engine.tensorFrom('t', [4], [1, 2, 3, 4], 'u32');
    const first = engine.readAll([t], { awaitedLater: true });
    engine.upload(t, [5, 6, 7, 8]);
    const second = engine.readAll([t], { awaitedLater: true });
    expect(Array.from((await first)[0])).toEqual([1, 2, 3, 4]);
    expect(Array.from((await second)[0])).toEqual([5, 6, 7, 8]);
    engine.upload(t, [9, 10, 11, 12]);
    expect(Array.from(await engine.read(t))).toEqual([9, 10, 11, 12]);
  });

  it('keeps at most 4 MiB of staging buffers, the sizes read last, whatever the sizes read', async () => {
    const engine = await gpuEngine();
    const kept = () => (engine as unknown as { keptStagingBytes: number }).keptStagingBytes;
    // 24 reads of 24 sizes from 256 KiB up, values checked at each.
    for (let k = 0; k < 24; k++) {
      const n = (1 << 16) + k;
      const t = engine.tensorFrom(
        `t${k}`,
        [n],
        Array.from({ length: n }, (_, i) => (i * 7 + k) % 1000),
        'u32',
      );
      const [values] = await engine.readAll([t]);
      expect(values[n - 1], `read ${k}`).toBe(((n - 1) * 7 + k) % 1000);
      expect(kept()).toBeLessThanOrEqual(4 << 20);
      engine.destroyTensor(t);
    }
    expect(kept()).toBeGreaterThan(3 << 20);
    // Larger than the whole allowance: never kept.
    const big = engine.tensor('big', [(4 << 20) / 4 + 1], 'u32');
    const before = kept();
    await engine.readAll([big]);
    expect(kept()).toBe(before);
  });
});
