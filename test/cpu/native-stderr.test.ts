// Dawn's native stderr lines the engine knows to be harmless are dropped, matched whole; every other line, stdout
// and the exit status pass unchanged (engine/native-stderr-node.ts, which train.js runs under).
import { describe, it, expect } from 'vitest';
import { spawnSync } from 'node:child_process';
import { isHarmlessDeviceLine } from '../../engine/native-stderr-node.ts';

const UNIFORM = 'Warning: maxDynamicUniformBuffersPerPipelineLayout artificially reduced from 1000000 to 16 to fit dynamic offset allocation limit.';
const STORAGE = 'Warning: maxDynamicStorageBuffersPerPipelineLayout artificially reduced from 1000000 to 16 to fit dynamic offset allocation limit.';

describe('native stderr filter', () => {
  it('drops exactly Dawn\'s two dynamic-buffer lines', () => {
    expect([UNIFORM, STORAGE].map(isHarmlessDeviceLine)).toEqual([true, true]);
    for (const line of [
      `${UNIFORM} and more`, `  ${UNIFORM}`, 'Warning: maxStorageBuffersPerShaderStage artificially reduced from 1000000 to 8',
      'Warning: Vulkan device lost', 'Error: Dawn validation error', 'WebGPU error: out of memory',
    ]) expect(isHarmlessDeviceLine(line), line).toBe(false);
  });

  it('a program run under it loses those lines written to fd 2 and keeps every other line, its stdout and its exit code', () => {
    const run = spawnSync(process.execPath, ['--import', './tools/node-loader.js', 'test/support/stderr-filter-child.ts', '3'], { encoding: 'utf8' });
    expect(run.status).toBe(3);
    expect(run.stderr.trim().split('\n')).toEqual(['Warning: a device warning the engine does not know', 'WebGPU error: a validation error']);
    expect(run.stdout).toBe('stdout is the child\'s own\n');
  });
});
