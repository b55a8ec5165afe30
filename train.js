#!/usr/bin/env node
// Entry point: `node train.js [--config run.yaml] [key.sub=value ...]`. Registers the TypeScript and WGSL
// loaders, then hands over to the Node command line of the trainer.
import './tools/node-loader.js';

const { main } = await import('./ppo/cli-node.ts');
process.exitCode = await main(process.argv.slice(2));
