// node tools/verl-case.js CASE.json — see tools/verl-case.ts.
import './node-loader.js';

const { main } = await import('./verl-case.ts');
process.exitCode = await main(process.argv[2]);
