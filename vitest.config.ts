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
    // A cold Mesa shader cache (a fresh machine) compiles each pipeline at its first dispatch: the slowest test
    // took 44 s on an empty cache (load average 7; README's cold-compile paragraph), so 5 minutes leaves room for a
    // loaded machine and still catches hangs.
    testTimeout: 300_000,
    hookTimeout: 300_000,
  },
});
