#!/usr/bin/env node
// Entry point of the reward-model job: `node reward-model.js key=value …` (docs/sft-and-reward-models.md): a
// *ForSequenceClassification trained on preference pairs with the Bradley–Terry loss. Its own entry, as TRL's and
// OpenRLHF's reward trainers are their own scripts (verl has none). An error that stops the job is one line on stderr
// (TRAIN_DEBUG=1 adds its stack trace).
import './tools/node-loader.js';

async function runRewardModel() {
  const { main } = await import('./ppo/jobs/supervised-command-node.ts');
  const { runMain } = await import('./ppo/config/user-error.ts');
  return runMain(() => main('reward-model', process.argv.slice(2)));
}

const { runWithFilteredStderr } = await import('./engine/native-stderr-node.ts');
process.exitCode = (await runWithFilteredStderr()) ?? (await runRewardModel());
