#!/usr/bin/env node
// `node tools/plot.js RUN_DIR`: PNG charts and an HTML page of a training run's metrics.jsonl, in RUN_DIR/charts/.
import './node-loader.js';

const { runPlot } = await import('./plot/cli.ts');
process.exitCode = runPlot(process.argv.slice(2));
