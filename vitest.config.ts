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
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
