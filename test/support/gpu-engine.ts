// Shared engine for GPU tests. A missing adapter fails the test with the setup hint; it never skips.
import { afterAll } from 'vitest';
import { Engine } from '../../engine/index.ts';

let enginePromise: Promise<Engine> | null = null;

export function gpuEngine(): Promise<Engine> {
  if (!enginePromise) {
    enginePromise = Engine.create();
    afterAll(async () => {
      const engine = await enginePromise!;
      await engine.sync();
      engine.destroy();
      enginePromise = null;
    });
  }
  return enginePromise;
}
