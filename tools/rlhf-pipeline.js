#!/usr/bin/env node
// `node tools/rlhf-pipeline.js [--out DIR]`: SFT → reward model → PPO on the built-in arithmetic task, each stage
// the command a user types (node sft.js, node reward-model.js, node train.js), printed, with the previous stage's
// checkpoint as its input (docs/sft-and-reward-models.md).
import './node-loader.js';

const { runPipeline } = await import('./rlhf-pipeline-cli.ts');
const { runMain } = await import('../ppo/config/user-error.ts');
process.exitCode = await runMain(() => runPipeline(process.argv.slice(2)));
