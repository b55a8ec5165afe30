#!/usr/bin/env node
// `node tools/bench.js kernels|train|rollout|storage|lm-head|peers [--json]`: benchmarks on this machine's WebGPU
// device (storage: the LoRA base's storage and the rollout's dtype, tools/bench/storage.ts); `node
// tools/bench.js memory --model DIR`: a PPO run's memory plan for a checkpoint, without running it; `node
// tools/bench.js gpu-report [--tiny] [--allow-software]`: the whole first-run report of a GPU
// (tools/bench/gpu-report.ts).
import './node-loader.js';

const { runWithFilteredStderr } = await import('../engine/native-stderr-node.ts');
const { runBenchmarks } = await import('./bench/cli.ts');
// A suite's bad flag (`--rounds=0`) or any error that stops it: one line, status 1 (TRAIN_DEBUG=1 adds the stack).
const { runMain } = await import('../ppo/config/user-error.ts');
process.exitCode = (await runWithFilteredStderr()) ?? (await runMain(() => runBenchmarks(process.argv.slice(2))));
