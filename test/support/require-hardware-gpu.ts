// globalSetup of the real-GPU tier (vitest.gpu.config.ts): stops the tier before any file runs when the adapter is
// a software one (lavapipe, SwiftShader), whose passing tests would say nothing about a GPU.
import { requireHardwareGpu } from './real-gpu-engine.ts';

export default async function setup(): Promise<void> {
  const engine = await requireHardwareGpu();
  await engine.sync();
  engine.destroy();
}
