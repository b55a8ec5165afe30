import { configDefaults, defineConfig } from 'vitest/config';
import { wgslAsString } from './tools/vite-wgsl-plugin.ts';
import { DEFAULT_LIMITS_TESTS, GPU_CLASS_TESTS } from './test/support/gpu-class-tests.ts';

// test/webgpu runs once per device class (engine/device.ts): every tier under the CPU class, then the files of
// test/support/gpu-class-tests.ts again under the GPU class, and its kernel, model and trainer files once more within
// WebGPU's default limits (WEBGPU_LIMITS=default), so every kernel is known to fit any WebGPU device.

const shared = {
  // lavapipe is CPU-bound: one GPU test file at a time per core keeps timings stable.
  // A cold Mesa shader cache (a fresh machine) compiles each pipeline at its first dispatch: the slowest test
  // took 44 s on an empty cache (load average 7; docs/tests.md#timeouts), so 5 minutes leaves room for a
  // loaded machine and still catches hangs.
  testTimeout: 300_000,
  hookTimeout: 300_000,
};

export default defineConfig({
  plugins: [wgslAsString],
  test: {
    maxWorkers: 2,
    projects: [
      {
        plugins: [wgslAsString],
        test: {
          ...shared,
          name: 'cpu-class',
          include: ['test/**/*.test.ts'],
          // test/gpu/ demands a hardware adapter: opt in with npm run test:gpu (vitest.gpu.config.ts).
          exclude: [...configDefaults.exclude, 'test/gpu/**'],
          // Pinned, not detected: on a GPU workstation too, npm test runs each class once.
          env: { WEBGPU_DEVICE_CLASS: 'cpu' },
        },
      },
      {
        plugins: [wgslAsString],
        test: { ...shared, name: 'gpu-class', include: GPU_CLASS_TESTS, env: { WEBGPU_DEVICE_CLASS: 'gpu' } },
      },
      {
        plugins: [wgslAsString],
        test: {
          ...shared,
          name: 'default-limits',
          include: DEFAULT_LIMITS_TESTS,
          env: { WEBGPU_DEVICE_CLASS: 'gpu', WEBGPU_LIMITS: 'default' },
        },
      },
    ],
  },
});
