import { defineConfig, type Plugin } from 'vitest/config';

const wgslAsString: Plugin = {
  name: 'wgsl-as-string',
  transform(code, id) {
    if (id.endsWith('.wgsl')) return { code: `export default ${JSON.stringify(code)};`, map: null };
    return undefined;
  },
};

export default defineConfig({
  plugins: [wgslAsString],
  test: {
    include: ['test/**/*.test.ts'],
    // lavapipe is CPU-bound: one GPU test file at a time per core keeps timings stable.
    maxWorkers: 2,
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
