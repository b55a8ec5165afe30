// npm run test:gpu: the opt-in real-GPU tier. test/gpu/ (kernels at real-model shapes) and, on the same hardware
// adapter, the files npm test runs under the GPU class on lavapipe (test/support/gpu-class-tests.ts: every kernel
// against its reference, the models, the trainer's numbers). A software adapter fails the tier rather than passing
// without a GPU. The class is the detected one: on a GPU that is gpu.
import { defineConfig } from 'vitest/config';
import { wgslAsString } from './tools/vite-wgsl-plugin.ts';
import { GPU_CLASS_TESTS } from './test/support/gpu-class-tests.ts';

export default defineConfig({
  plugins: [wgslAsString],
  test: {
    include: ['test/gpu/**/*.test.ts', ...GPU_CLASS_TESTS],
    // On a software adapter the tier stops here, before any file runs.
    globalSetup: ['test/support/require-hardware-gpu.ts'],
    maxWorkers: 1,
    testTimeout: 300_000,
    hookTimeout: 120_000,
  },
});
