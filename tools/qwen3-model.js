#!/usr/bin/env node
// `node tools/qwen3-model.js DIR [--hidden 128|1024] [--layers N]`: a Qwen3-shaped bf16 checkpoint with random
// weights and the real Qwen3 tokenizer (vocabulary 151,936), for trying real-scale runs.
import './node-loader.js';

const { runQwen3Model } = await import('./qwen3-model.ts');
process.exitCode = await runQwen3Model(process.argv.slice(2));
