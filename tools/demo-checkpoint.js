#!/usr/bin/env node
// `node tools/demo-checkpoint.js [--out DIR] [key.sub=value ...]`: the default job's warm start (pretraining + SFT,
// as `node train.js` runs it), saved as the browser demo's starting checkpoint (demo/public/warm-start/).
import './node-loader.js';

const { runWithFilteredStderr } = await import('../engine/native-stderr-node.ts');
const { writeDemoCheckpoint } = await import('./demo-checkpoint-cli.ts');
process.exitCode = (await runWithFilteredStderr()) ?? (await writeDemoCheckpoint(process.argv.slice(2)));
