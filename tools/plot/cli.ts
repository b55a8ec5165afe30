// `node tools/plot.js RUN_DIR`: reads RUN_DIR/metrics.jsonl and writes RUN_DIR/charts/<chart>.png for each chart
// with data, plus RUN_DIR/charts/index.html with all of them and the last step's metrics.
import { mkdirSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { chartsWithData } from './charts.ts';
import { renderPage } from './html.ts';
import { layoutChart } from './layout.ts';
import { readRunMetrics, RunInputError } from './metrics.ts';
import { encodePng } from './png.ts';
import { rasterize } from './raster.ts';

/** Returns the paths written. */
export function plotRun(runDir: string): string[] {
  const run = readRunMetrics(runDir);
  const charts = chartsWithData(run).map((chart) => ({ chart, scene: layoutChart(chart) }));
  const outDir = join(runDir, 'charts');
  mkdirSync(outDir, { recursive: true });
  const written: string[] = [];
  for (const { chart, scene } of charts) {
    const { width, height, rgb } = rasterize(scene);
    const file = join(outDir, `${chart.id}.png`);
    writeFileSync(file, encodePng(width, height, rgb));
    written.push(file);
  }
  const page = join(outDir, 'index.html');
  const title = `Training run ${basename(resolve(runDir))}`;
  writeFileSync(page, renderPage({ title, source: run.file, charts, last: run.steps[run.steps.length - 1] }));
  written.push(page);
  return written;
}

export function runPlot(argv: string[]): number {
  if (argv.length !== 1 || argv[0].startsWith('-')) {
    console.error(
      "usage: node tools/plot.js RUN_DIR   (the trainer's trainer.default_local_dir, holding metrics.jsonl)",
    );
    return 2;
  }
  try {
    for (const file of plotRun(argv[0])) console.log(file);
    return 0;
  } catch (err) {
    if (!(err instanceof RunInputError)) throw err;
    console.error(`plot: ${err.message}`);
    return 1;
  }
}
