#!/usr/bin/env node
// Entry point of the SFT job: `node sft.js key=value …` with verl's fsdp_sft_trainer keys
// (docs/sft-and-reward-models.md). Its own entry beside train.js, as verl's SFT trainer is its own module with its own
// config tree: its data.*, model.* and trainer.* keys share names with the PPO trainer's but not their meaning. An
// error that stops the job is one line on stderr (TRAIN_DEBUG=1 adds its stack trace).
import './tools/node-loader.js';

async function runSft() {
  const { main } = await import('./ppo/jobs/supervised-command-node.ts');
  const { runMain } = await import('./ppo/config/user-error.ts');
  return runMain(() => main('sft', process.argv.slice(2)));
}

const { runWithFilteredStderr } = await import('./engine/native-stderr-node.ts');
process.exitCode = (await runWithFilteredStderr()) ?? (await runSft());
