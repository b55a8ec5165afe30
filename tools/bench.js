#!/usr/bin/env node
// `node tools/bench.js kernels|train|rollout|lm-head|peers [--json]`: benchmarks on this machine's WebGPU device; `node
// tools/bench.js memory --model DIR`: a PPO run's memory plan for a checkpoint, without running it; `node
// tools/bench.js gpu-report [--tiny] [--allow-software]`: the whole first-run report of a GPU
// (tools/bench/gpu-report.ts).
import './node-loader.js';

const { runWithFilteredStderr } = await import('../engine/native-stderr-node.ts');
const { runBenchmarks } = await import('./bench/cli.ts');
process.exitCode = (await runWithFilteredStderr()) ?? (await runBenchmarks(process.argv.slice(2)));
