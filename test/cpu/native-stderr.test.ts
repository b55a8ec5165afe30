// Dawn's native stderr lines the engine knows to be harmless are dropped, matched whole; every other line, stdout
// and the exit status pass unchanged (engine/native-stderr-node.ts, which train.js runs under).
import { describe, it, expect } from 'vitest';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { isHarmlessDeviceLine } from '../../engine/native-stderr-node.ts';

const UNIFORM =
  'Warning: maxDynamicUniformBuffersPerPipelineLayout artificially reduced from 1000000 to 16 to fit dynamic offset ' +
  'allocation limit.';
const STORAGE =
  'Warning: maxDynamicStorageBuffersPerPipelineLayout artificially reduced from 1000000 to 16 to fit dynamic offset ' +
  'allocation limit.';

describe('native stderr filter', () => {
  it("drops exactly Dawn's two dynamic-buffer lines", () => {
    expect([UNIFORM, STORAGE].map(isHarmlessDeviceLine)).toEqual([true, true]);
    for (const line of [
      `${UNIFORM} and more`,
      `  ${UNIFORM}`,
      'Warning: maxStorageBuffersPerShaderStage artificially reduced from 1000000 to 8',
      'Warning: Vulkan device lost',
      'Error: Dawn validation error',
      'WebGPU error: out of memory',
    ])
      expect(isHarmlessDeviceLine(line), line).toBe(false);
  });

  it(
    'a program run under it loses those lines written to fd 2 and keeps every other line, its stdout and its exit ' +
      'code',
    () => {
      const run = spawnSync(
        process.execPath,
        ['--import', './tools/node-loader.js', 'test/support/stderr-filter-child.ts', '3'],
        { encoding: 'utf8' },
      );
      expect(run.status).toBe(3);
      expect(run.stderr.trim().split('\n')).toEqual([
        'Warning: a device warning the engine does not know',
        'WebGPU error: a validation error',
      ]);
      expect(run.stdout).toBe("stdout is the child's own\n");
    },
  );

  it("every entry point that opens the device runs under it (tools/setup.sh's probe and the tools too)", () => {
    // Entry points that never open a WebGPU device, so have no Dawn lines to filter; any other .js entry must.
    const deviceFree = [
      'tools/jsonl-to-parquet.js',
      'tools/plot.js',
      'tools/qwen3-model.js',
      'tools/retrieval-server.js',
      'tools/rlhf-pipeline.js',
      'tools/node-loader.js',
      'tools/wgsl-hooks.js',
    ];
    const entries = [
      ...readdirSync('.').filter((f) => f.endsWith('.js')),
      ...readdirSync('tools')
        .filter((f) => f.endsWith('.js'))
        .map((f) => `tools/${f}`),
    ].filter((f) => !deviceFree.includes(f));
    expect(entries).toEqual(
      expect.arrayContaining(['train.js', 'serve.js', 'tools/bench.js', 'tools/probe-adapter.js']),
    );
    const unfiltered = entries.filter((f) => !readFileSync(f, 'utf8').includes('runWithFilteredStderr()'));
    expect(unfiltered).toEqual([]);
  });
});
