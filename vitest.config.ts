import { configDefaults, defineConfig } from 'vitest/config';
import { wgslAsString } from './tools/vite-wgsl-plugin.ts';

export default defineConfig({
  plugins: [wgslAsString],
  test: {
    include: ['test/**/*.test.ts'],
    // test/gpu/ demands a hardware adapter: opt in with npm run test:gpu (vitest.gpu.config.ts).
    exclude: [...configDefaults.exclude, 'test/gpu/**'],
    // lavapipe is CPU-bound: one GPU test file at a time per core keeps timings stable.
    maxWorkers: 2,
    // A cold Mesa shader cache (a fresh machine) compiles each pipeline at its first dispatch: the head-size-128
    // attention kernels alone take minutes in LLVM there, seconds once cached. Hangs are still caught.
    testTimeout: 900_000,
    hookTimeout: 900_000,
  },
});
