#!/usr/bin/env node
// Entry point: `node train.js [--config run.yaml] [key.sub=value ...]`. Registers the TypeScript and WGSL
// loaders, then hands over to the Node command line of the trainer, which draws the run's charts at the end;
// an error that stops the run is one line on stderr (TRAIN_DEBUG=1 adds its stack trace). The trainer runs in a
// child of this process whose stderr passes through engine/native-stderr-node.ts, which drops only the lines Dawn
// prints natively that the engine knows to be harmless.
import './tools/node-loader.js';

async function runTrainer() {
  const { main } = await import('./ppo/jobs/ppo-job-node.ts');
  const { runMain } = await import('./ppo/config/user-error.ts');
  const { plotRun } = await import('./tools/plot/cli.ts');
  return runMain(() => main(process.argv.slice(2), { writeCharts: plotRun }));
}

const { runWithFilteredStderr } = await import('./engine/native-stderr-node.ts');
process.exitCode = (await runWithFilteredStderr()) ?? (await runTrainer());
