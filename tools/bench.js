#!/usr/bin/env node
// `node tools/bench.js kernels|train|rollout|peers [--json]`: benchmarks on this machine's WebGPU device.
import './node-loader.js';

const { runBenchmarks } = await import('./bench/cli.ts');
process.exitCode = await runBenchmarks(process.argv.slice(2));
