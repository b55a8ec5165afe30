#!/usr/bin/env node
// Entry point: `node train.js [--config run.yaml] [key.sub=value ...]`. Registers the TypeScript and WGSL
// loaders, then hands over to the Node command line of the trainer, which draws the run's charts at the end;
// an error that stops the run is one line on stderr (TRAIN_DEBUG=1 adds its stack trace).
import './tools/node-loader.js';

const { main } = await import('./ppo/run/cli-node.ts');
const { runMain } = await import('./ppo/run/user-error.ts');
const { plotRun } = await import('./tools/plot/cli.ts');
process.exitCode = await runMain(() => main(process.argv.slice(2), { writeCharts: plotRun }));
