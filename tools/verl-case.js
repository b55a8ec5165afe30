// node tools/verl-case.js CASE.json — see tools/verl-case.ts.
import './node-loader.js';

const { runWithFilteredStderr } = await import('../engine/native-stderr-node.ts');
const { main } = await import('./verl-case.ts');
process.exitCode = (await runWithFilteredStderr()) ?? (await main(process.argv[2]));
