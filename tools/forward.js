#!/usr/bin/env node
// `node tools/forward.js --model DIR --input FILE.json`: one forward pass, printed as JSON.
import './node-loader.js';

const { runWithFilteredStderr } = await import('../engine/native-stderr-node.ts');
const { runForward } = await import('./forward-cli.ts');
process.exitCode = (await runWithFilteredStderr()) ?? (await runForward(process.argv.slice(2)));
