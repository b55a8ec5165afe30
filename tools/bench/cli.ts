// Dispatches `node tools/bench.js <suite>` and prints a table or, with --json, a JSON array of rows.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { Engine, describeDevice, readKnobs, type EngineKnobs } from '../../engine/index.ts';
import type { PipelineRecord } from '../../engine/pipeline-log.ts';
import { benchmarkCompile, readPipelineLog } from './compile.ts';

type Row = Record<string, string | number>;

const SUITES: Record<string, (engine: Engine, argv: string[]) => Promise<Row[]>> = {
  kernels: async (engine, argv) => {
    const only = argv
      .find((a) => a.startsWith('--only='))
      ?.slice('--only='.length)
      .split(',');
    // The validation line goes to stderr, so --json's stdout stays one JSON document.
    return (await import('./kernels.ts')).benchmarkKernels(engine, { only }, console.error) as unknown as Promise<
      Row[]
    >;
  },
  train: async (engine) => (await import('./train.ts')).benchmarkTrainStep(engine) as unknown as Promise<Row[]>,
  rollout: async (engine) => (await import('./rollout.ts')).benchmarkRollout(engine) as unknown as Promise<Row[]>,
  storage: async (engine, argv) =>
    (await import('./storage.ts')).benchmarkStorage(engine, argv) as unknown as Promise<Row[]>,
  'lm-head': async (engine) => (await import('./lm-head.ts')).benchmarkLmHead(engine) as unknown as Promise<Row[]>,
  peers: async (engine) => (await import('./peers.ts')).benchmarkPeers(engine) as unknown as Promise<Row[]>,
  soak: async (_engine, argv) => (await import('./soak.ts')).benchmarkSoak(argv),
  servers: async (_engine, argv) => (await import('./servers.ts')).benchmarkServers(argv),
  'serve-soak': async (_engine, argv) => (await import('./serve-soak.ts')).benchmarkServeSoak(argv),
};

function formatTable(rows: Row[]): string {
  if (rows.length === 0) return '(no rows)';
  const keys = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const cell = (v: string | number | undefined) =>
    v === undefined
      ? ''
      : typeof v === 'number'
        ? Number.isInteger(v)
          ? String(v)
          : v >= 100
            ? v.toFixed(0)
            : v.toPrecision(4)
        : v;
  const widths = keys.map((k) => Math.max(k.length, ...rows.map((r) => cell(r[k]).length)));
  const line = (values: string[]) => values.map((v, i) => v.padEnd(widths[i])).join('  ');
  return [
    line(keys),
    line(widths.map((w) => '-'.repeat(w))),
    ...rows.map((r) => line(keys.map((k) => cell(r[k])))),
  ].join('\n');
}

export async function runBenchmarks(argv: string[]): Promise<number> {
  const json = argv.includes('--json');
  const suite = argv.find((a) => !a.startsWith('--'));
  if (!suite || !(SUITES[suite] || suite === 'memory' || suite === 'compile' || suite === 'gpu-report')) {
    console.error(
      `usage: node tools/bench.js <${Object.keys(SUITES).join('|')}> [--json] [kernels: --only=op,op] [soak: ` +
        `--steps=N --warmup=N --every=N] [servers: --steps=N | --serve-throughput[=C] --answer-tokens=N --rounds=N --client=http|fetch] [storage: --rounds=N --layers=N --steps=N] [serve-soak: --requests=N --in-flight=N] | memory --model DIR [--memory-gb N] [key=value ...]` +
        ' | compile PIPELINES.jsonl | gpu-report [--tiny] [--allow-software] [--skip=section,...] [--out=FILE] ' +
        '[--json]',
    );
    return 2;
  }
  const pipelineLog = argv.filter((a) => !a.startsWith('--'))[1];
  if (suite === 'compile' && !pipelineLog) {
    console.error(
      'usage: node tools/bench.js compile PIPELINES.jsonl (record it with WEBGPU_PIPELINE_LOG=PIPELINES.jsonl on any ' +
        'run, e.g. npm test)',
    );
    return 2;
  }
  let pipelines: PipelineRecord[] = [];
  if (suite === 'compile' && pipelineLog) {
    try {
      pipelines = readPipelineLog(pipelineLog);
    } catch (err) {
      console.error((err as Error).message);
      return 2;
    }
  }
  // An empty shader cache of its own, set before the device exists (Mesa reads it when the driver loads).
  const coldCache = suite === 'compile' ? mkdtempSync(join(tmpdir(), 'mesa-cold-')) : null;
  if (coldCache) process.env.MESA_SHADER_CACHE_DIR = coldCache;
  let knobs: EngineKnobs;
  try {
    knobs = readKnobs();
  } catch (err) {
    // A bad WEBGPU_* knob is bad input, as train.js reports it: one line, exit 1 (2 is for a bad command line).
    console.error(`error: ${(err as Error).message}`);
    return 1;
  }
  const engine = await Engine.create(knobs, totalmem());
  try {
    if (!json) console.log(`device: ${describeDevice(engine.caps, engine.knobs)}`);
    if (suite === 'gpu-report') {
      // With --json the report goes to stdout and the progress lines to stderr.
      const { code, report } = await (await import('./gpu-report.ts')).runGpuReport(
        engine,
        argv,
        json ? console.error : console.log,
      );
      if (json && report) console.log(JSON.stringify(report, null, 2));
      return code;
    }
    if (suite === 'memory') {
      const result = await (await import('./memory.ts')).memoryPlanOfCheckpoint(engine, argv);
      if (typeof result === 'string') {
        console.error(result);
        return 2;
      }
      console.log(json ? JSON.stringify(result.plan, null, 2) : result.lines.join('\n'));
      return result.plan.problems.length > 0 ? 1 : 0;
    }
    let rows: Row[];
    try {
      rows =
        suite === 'compile'
          ? ((await benchmarkCompile(engine, pipelines)) as unknown as Row[])
          : await SUITES[suite](engine, argv);
    } catch (err) {
      // A kernel whose output is off its reference stops the benchmark: one line, exit 1, nothing timed.
      if (!(err as Error).message.startsWith('kernel ')) throw err;
      console.error(`error: ${(err as Error).message}`);
      return 1;
    }
    console.log(json ? JSON.stringify(rows, null, 2) : formatTable(rows));
    return 0;
  } finally {
    await engine.sync();
    engine.destroy();
    if (coldCache) rmSync(coldCache, { recursive: true, force: true });
  }
}
