// The browser demo's build: the same engine, models and PPO sources as `node train.js`, with WGSL imported as
// strings by the plugin vitest uses. `base: './'` keeps the static build servable from any path.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';
import { wgslAsString } from '../tools/vite-wgsl-plugin.ts';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: './',
  plugins: [wgslAsString],
  server: { fs: { allow: [repoRoot] } },
  // One bundle holds the whole trainer (engine, kernels, tokenizer, config parser): ~0.5 MB is expected.
  build: { outDir: 'dist', emptyOutDir: true, target: 'es2022', chunkSizeWarningLimit: 1024 },
});
