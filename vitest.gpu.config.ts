// npm run test:gpu: only the opt-in real-GPU tier, test/gpu/, which refuses software adapters.
import { defineConfig } from 'vitest/config';
import { wgslAsString } from './tools/vite-wgsl-plugin.ts';

export default defineConfig({
  plugins: [wgslAsString],
  test: { include: ['test/gpu/**/*.test.ts'], maxWorkers: 1, testTimeout: 300_000, hookTimeout: 120_000 },
});
