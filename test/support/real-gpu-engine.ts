// The opt-in real-GPU tier (npm run test:gpu): an engine on a hardware adapter, or a failure that says why. A
// software adapter (lavapipe, SwiftShader) would pass these tests without telling anything about a GPU, so it is
// refused rather than skipped in silence. TEST_GPU_ALLOW_SOFTWARE=1 lets one file of the tier run on a software
// adapter once, to check the tests themselves where no GPU is lent (its timings and passes say nothing of a GPU).
import { afterAll } from 'vitest';
import { Engine, readKnobs, type EngineKnobs } from '../../engine/index.ts';

let enginePromise: Promise<Engine> | null = null;

/** An engine on a hardware adapter, or an error naming the software adapter found instead. */
export async function requireHardwareGpu(knobs: EngineKnobs = readKnobs()): Promise<Engine> {
  const engine = await Engine.create(knobs);
  if (engine.caps.softwareAdapter && process.env.TEST_GPU_ALLOW_SOFTWARE !== '1') {
    const description = engine.caps.description;
    engine.destroy();
    throw new Error(
      `test/gpu needs a hardware GPU adapter; found the software adapter "${description}". ` +
        'npm test runs the cpu, webgpu and browser tiers on any adapter.',
    );
  }
  return engine;
}

export function realGpuEngine(): Promise<Engine> {
  if (!enginePromise) {
    enginePromise = requireHardwareGpu();
    afterAll(async () => {
      const engine = await enginePromise!.catch(() => null);
      enginePromise = null;
      if (!engine) return;
      await engine.sync();
      engine.destroy();
    });
  }
  return enginePromise;
}
