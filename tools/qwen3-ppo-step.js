#!/usr/bin/env node
// `node tools/qwen3-ppo-step.js [--hidden 1024|128] [--layers N] [--keep DIR] [--no-save]`: one PPO step with a
// critic on a Qwen3-shaped bf16 model with the real tokenizer (vocabulary 151,936), then its checkpoints reloaded.
import './node-loader.js';

const { runWithFilteredStderr } = await import('../engine/native-stderr-node.ts');
const { runQwen3PpoStep } = await import('./qwen3-ppo-step.ts');
process.exitCode = (await runWithFilteredStderr()) ?? (await runQwen3PpoStep(process.argv.slice(2)));
