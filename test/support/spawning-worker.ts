// A stand-in for an entry point whose work starts another entry point as a plain child (bench.js servers starts
// serve.js and train.js): runs itself under engine/native-stderr-node.ts's filter and, as the worker, runs
// test/support/stderr-filter-child.ts with exit code 5 and exits with that child's status.
import { spawnSync } from 'node:child_process';
import { runWithFilteredStderr } from '../../engine/native-stderr-node.ts';

const code = await runWithFilteredStderr();
if (code !== null) process.exitCode = code;
else {
  const child = spawnSync(process.execPath, [
    '--import',
    './tools/node-loader.js',
    'test/support/stderr-filter-child.ts',
    '5',
  ]);
  process.exitCode = child.status ?? 128;
}
