// A stand-in for train.js in test/cpu/native-stderr.test.ts: runs itself under engine/native-stderr-node.ts's filter
// and, as the child, writes lines straight to file descriptor 2 (as Dawn's native code does), then exits with the
// code given as its first argument.
import { writeSync } from 'node:fs';
import { runWithFilteredStderr } from '../../engine/native-stderr-node.ts';

const code = await runWithFilteredStderr();
if (code !== null) process.exitCode = code;
else {
  writeSync(
    2,
    'Warning: maxDynamicUniformBuffersPerPipelineLayout artificially reduced from 1000000 to 16 to fit dynamic ' +
      'offset allocation limit.\n',
  );
  writeSync(
    2,
    'Warning: maxDynamicStorageBuffersPerPipelineLayout artificially reduced from 1000000 to 16 to fit dynamic ' +
      'offset allocation limit.\n',
  );
  writeSync(2, 'Warning: a device warning the engine does not know\n');
  process.stdout.write("stdout is the child's own\n");
  console.error('WebGPU error: a validation error');
  process.exitCode = Number(process.argv[2]);
}
