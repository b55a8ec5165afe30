// fsdp_config.optimizer_offload: AdamW's moments in host memory, streamed through a small staging buffer, must give
// the resident optimizer's update bit for bit — the weights (alignment padding included) and the moments — under
// torch's AdamW and bitsandbytes' AdamW8bit, with clipping active. A staging buffer of 16 KiB makes each step many
// fills, cuts tensors into runs (8-bit ones on block boundaries) and ends runs mid-vec4. A state saved by either
// optimizer resumes in the other, bit for bit. A save writes optimizer.safetensors tensor by tensor from the offloaded
// optimizer's own host arrays (no copy of the moments, no file-sized buffer): the file is the bytes the one-buffer
// encoding gives. (The run-level check, actor and critic through train.js, is in resume.test.ts.)
import { describe, it, expect } from 'vitest';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { makeTempDir } from '../support/temp-dir.ts';
import { writeOptimizerState } from '../../ppo/training/optimizer-state-node.ts';
import { gpuEngine } from '../support/gpu-engine.ts';
import { randomArray } from '../support/arrays.ts';
import { Arena, Engine, readKnobs } from '../../engine/index.ts';
import { AdamWOptimizer, offloadStagingBytes, type OptimizerName } from '../../ppo/training/adamw-optimizer.ts';
import { decodeOptimizerState, encodeOptimizerState } from '../../ppo/training/optimizer-state.ts';

const ENTRIES = [
  { name: 'embed', shape: [40, 1000] },
  { name: 'norm', shape: [300] },
  { name: 'odd', shape: [7, 37] },
  { name: 'proj', shape: [5, 1000] },
];
const STAGING = 16 * 1024;
const CONFIG = { lr: 1e-2, betas: [0.9, 0.999] as [number, number], eps: 1e-8, weightDecay: 0.01, maxGradNorm: 1 };

async function arenaWords(engine: Engine, arena: Arena): Promise<Float32Array[]> {
  return Promise.all(arena.segments.map((segment) => engine.read(segment)));
}

describe('optimizer offload', () => {
  for (const optimizer of ['AdamW', 'AdamW8bit'] as OptimizerName[])
    it(`${optimizer}: offloaded steps equal resident ones bit for bit, and either state resumes in the other`, async () => {
      const engine = await gpuEngine();
      const layout = Arena.plan(engine, ENTRIES);
      const start = ENTRIES.map(({ name, shape }) => randomArray(shape[0] * (shape[1] ?? 1), name.length));
      const make = (label: string, offload: boolean) => {
        const params = new Arena(engine, label, layout);
        ENTRIES.forEach(({ name }, i) => engine.upload(params.get(name), start[i]));
        const before = engine.allocatedBytes;
        const made = new AdamWOptimizer(engine, params, {
          ...CONFIG,
          optimizer,
          offload,
          offloadStagingBytes: STAGING,
        });
        return { optimizer: made, deviceBytes: engine.allocatedBytes - before };
      };
      const stepWith = async (o: AdamWOptimizer, step: number) => {
        for (const { name } of ENTRIES) {
          const g = o.grads.get(name);
          engine.upload(g, randomArray(g.size, 100 * step + g.size, 0.3));
        }
        await o.step();
      };
      const resident = make('resident', false);
      const offloaded = make('offloaded', true);
      // Device memory: gradients, the norm (and AdamW8bit's code table) and one staging buffer, no moments.
      const grads = layout.bufferSizes.reduce((a, b) => a + b, 0) * 4;
      const qmap = optimizer === 'AdamW8bit' ? 512 * 4 : 0;
      expect(offloaded.deviceBytes).toBe(grads + 16 + qmap + STAGING);
      // Without a limit from the test, the staging buffer the memory plan counts: here, all the moments at once.
      const params = new Arena(engine, 'default-staging', layout);
      const before = engine.allocatedBytes;
      new AdamWOptimizer(engine, params, { ...CONFIG, optimizer, offload: true });
      const planned = offloadStagingBytes(ENTRIES, optimizer, engine.maxBindingBytes);
      expect(engine.allocatedBytes - before).toBe(grads + 16 + qmap + planned);
      expect(planned).toBeLessThan(32 * 2 ** 20);
      expect(resident.deviceBytes).toBeGreaterThan(offloaded.deviceBytes + (optimizer === 'AdamW' ? 300_000 : 80_000));

      for (let step = 0; step < 3; step++) {
        await stepWith(resident.optimizer, step);
        const readsBefore = engine.transfers.readbacks;
        await stepWith(offloaded.optimizer, step);
        // One read-back per fill: the 16 KiB buffer takes the moments in several.
        expect(engine.transfers.readbacks - readsBefore).toBeGreaterThan(optimizer === 'AdamW' ? 20 : 3);
      }
      expect(await arenaWords(engine, offloaded.optimizer.params)).toEqual(
        await arenaWords(engine, resident.optimizer.params),
      );
      const residentState = encodeOptimizerState(await resident.optimizer.saveState());
      const saved = await offloaded.optimizer.saveState();
      expect(encodeOptimizerState(saved)).toEqual(residentState);
      // The offloaded state is the optimizer's host moments themselves, written to the file as they are.
      expect((await offloaded.optimizer.saveState()).m.get('embed')).toBe(saved.m.get('embed'));
      const file = join(await makeTempDir('offload-save-'), 'optimizer.safetensors');
      for (const o of [offloaded.optimizer, resident.optimizer]) {
        await writeOptimizerState(file, await o.saveState());
        expect(new Uint8Array(await readFile(file))).toEqual(residentState);
      }

      // Each saved state resumes in the other kind; two more steps stay identical to the uninterrupted runs.
      const offloadedResume = make('offloaded-resume', true).optimizer;
      const residentResume = make('resident-resume', false).optimizer;
      for (const [target, from] of [
        [offloadedResume, resident.optimizer],
        [residentResume, offloaded.optimizer],
      ] as const) {
        for (const { name } of ENTRIES)
          engine.upload(target.params.get(name), await engine.read(from.params.get(name)));
        const bytes = encodeOptimizerState(await from.saveState());
        target.loadState(decodeOptimizerState(bytes, 'optimizer.safetensors', ENTRIES));
      }
      for (let step = 3; step < 5; step++) {
        for (const o of [resident.optimizer, offloaded.optimizer, offloadedResume, residentResume])
          await stepWith(o, step);
      }
      const expected = await arenaWords(engine, resident.optimizer.params);
      const expectedState = encodeOptimizerState(await resident.optimizer.saveState());
      for (const o of [offloaded.optimizer, offloadedResume, residentResume]) {
        expect(await arenaWords(engine, o.params)).toEqual(expected);
        expect(encodeOptimizerState(await o.saveState())).toEqual(expectedState);
      }
    });

  // A tensor above the device's largest buffer lives in parts (engine/arena.ts): runs stop at each part. 25,600 values
  // in buffers of 64 KiB: parts of 128 and 72 rows (16,384 and 9,216 values, whole 8-bit blocks). (adamw8bitStep
  // windows a tensor by 64 KiB: no smaller binding.) The reference is the resident optimizer on an unsplit engine (the
  // resident AdamW8bit binds each tensor whole, so it cannot run split).
  it('a tensor split across buffers: its runs stop at the parts, the update is the unsplit one', async () => {
    const entries = [{ name: 'embed', shape: [200, 128] }, ...ENTRIES.slice(1)];
    const whole = await gpuEngine();
    const split = await Engine.create({ ...readKnobs(), maxBindingBytes: 64 * 1024, maxBufferBytes: 64 * 1024 });
    try {
      for (const optimizer of ['AdamW', 'AdamW8bit'] as OptimizerName[]) {
        const run = async (engine: Engine, offload: boolean) => {
          const params = new Arena(engine, `split-${offload}`, Arena.plan(engine, entries));
          expect(params.get('embed').parts).toHaveLength(engine === split ? 2 : 1);
          for (const [i, { name }] of entries.entries())
            engine.upload(params.get(name), randomArray(params.get(name).size, i + 1));
          const o = new AdamWOptimizer(engine, params, { ...CONFIG, optimizer, offload });
          for (let step = 0; step < 3; step++) {
            for (const { name } of entries) {
              const g = o.grads.get(name);
              engine.upload(g, randomArray(g.size, 100 * step + g.size, 0.3));
            }
            await o.step();
          }
          const weights = await Promise.all(entries.map(({ name }) => engine.read(params.get(name))));
          return { weights, state: encodeOptimizerState(await o.saveState()) };
        };
        const offloaded = await run(split, true);
        expect(split.caps.maxBufferSize).toBe(64 * 1024);
        const reference = await run(whole, false);
        expect(offloaded.weights, optimizer).toEqual(reference.weights);
        expect(offloaded.state, optimizer).toEqual(reference.state);
      }
    } finally {
      split.destroy();
    }
  });

  it('reset: an offloaded optimizer starts over as a new one', async () => {
    const engine = await gpuEngine();
    const layout = Arena.plan(engine, ENTRIES);
    const config = { ...CONFIG, offload: true, offloadStagingBytes: STAGING };
    const used = new AdamWOptimizer(engine, new Arena(engine, 'used', layout), config);
    for (const { name } of ENTRIES) engine.upload(used.grads.get(name), randomArray(used.grads.get(name).size, 3));
    await used.step();
    used.reset();
    const fresh = new AdamWOptimizer(engine, new Arena(engine, 'fresh', layout), config);
    expect(encodeOptimizerState(await used.saveState())).toEqual(encodeOptimizerState(await fresh.saveState()));
  });
});
