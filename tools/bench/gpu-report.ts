// `node tools/bench.js gpu-report [--quick] [--tiny] [--allow-software] [--skip=section,...] [--out=FILE]`: what a
// first run on a GPU should measure, sized to a lease: sections ordered by value, each writing the report as it
// finishes, so a lease cut short keeps what finished. The adapter (limits, features, memory, peak); every kernel
// case run once and compared with its reference at its own shape, then the real-size cases of kernel-lab/at-scale.ts
// checked on a seeded sample of output rows (validate); fp32 matmul at 4096³, checked by
// Freivalds' probes before it is timed; the training step (tiny, small, a GPT-2-124M-sized Llama); generation; each
// kernel's GFLOP/s or GB/s and its share of the card's peak; the same training step, generation and matmul in PyTorch
// eager fp32 on the same card (when python3 imports torch); one PPO step at Qwen3-0.6B's full shape (28 layers) and
// its memory; jax-js's WebGPU matmul on the same adapter (installed into a temporary folder, as `peers` installs
// TF.js). Full: 420 s of budgets. --quick: the first five sections at their smallest (one matmul layout, the tiny
// training step and generation), 110 s. Each section has a budget: a child process (the PPO step, torch) is killed
// at it, an in-process one starts no further case past it and says so. A section that cannot run is reported skipped
// with the reason. It refuses a software adapter (its timings are a CPU's) unless --allow-software; --tiny runs
// every section at tiny sizes (the CI smoke run on lavapipe), every case of each past its budget too. Prints a line
// per section and writes the report as JSON (FILE, default gpu-report.json) after each, replaced whole, never
// half-written.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { peakFp32Flops, type Engine } from '../../engine/index.ts';
import type { MatmulLayout } from '../../kernels/matmul/matmul.ts';
import { matmulBench } from '../kernel-lab/matmul.bench.ts';
import { AT_SCALE, atScaleCases, type AtScaleShape } from '../kernel-lab/at-scale.ts';
import { BENCH_GPT2_124M, BENCH_SMALL, BENCH_TINY } from '../../models/presets.ts';
import type { DecoderConfig } from '../../models/hf-config.ts';
import { timeKernel, type KernelBenchRow } from './harness.ts';
import { benchmarkKernels, kernelCases, validateKernels } from './kernels.ts';
import { benchmarkTrainStep, type TrainBenchRow } from './train.ts';
import { benchmarkRollout, type RolloutBenchRow } from './rollout.ts';
import { peakBandwidth } from './peak-bandwidth.ts';
import { peerFolder, shareDawnWithPeers } from './peer-install.ts';

/** In order of value: what a cut-short lease must not lose comes first. */
export const SECTIONS = [
  'adapter',
  'validate',
  'matmul',
  'train',
  'generation',
  'kernels',
  'torch',
  'ppo-step',
  'jax-js',
] as const;
/** The sections of --quick. */
export const QUICK_SECTIONS: readonly SectionName[] = ['adapter', 'validate', 'matmul', 'train', 'generation'];
export type SectionName = (typeof SECTIONS)[number];

export interface SectionReport {
  section: SectionName;
  status: 'ok' | 'skipped' | 'failed';
  /** Why it was skipped or failed; what it left out when its budget ran out. */
  reason?: string;
  seconds: number;
  budget_s: number;
  result?: unknown;
}

export interface GpuReport {
  mode: 'full' | 'tiny';
  quick: boolean;
  adapter: string;
  sections: SectionReport[];
  /** The headline figures, each named by what it compares (absent when a section behind it did not run). */
  summary: Record<string, number>;
}

/**
 * Seconds each section may take, full mode: 420 in all, so with the machine's start and the quick report the full
 * one fits a 15-minute lease once, with room for one rerun of the quick one.
 */
const BUDGET_S: Record<SectionName, number> = {
  adapter: 5,
  validate: 30,
  matmul: 40,
  train: 60,
  generation: 40,
  kernels: 60,
  torch: 60,
  'ppo-step': 100,
  'jax-js': 25,
};
/** --quick: 110 s in all, under the 120 s a first call on a fresh lease can spend. */
const QUICK_BUDGET_S: Partial<Record<SectionName, number>> = {
  adapter: 5,
  validate: 30,
  matmul: 25,
  train: 30,
  generation: 20,
};
/**
 * --tiny: the PPO step keeps Qwen3's 151,936-word head (its tokenizer is the real one), minutes on lavapipe; the
 * full tiny report is 420 s too.
 */
const TINY_BUDGET_S: Record<SectionName, number> = {
  adapter: 5,
  validate: 10,
  matmul: 10,
  train: 20,
  generation: 20,
  kernels: 10,
  torch: 60,
  'ppo-step': 240,
  'jax-js': 45,
};

const JAXJS_PACKAGES = ['@jax-js/jax@0.1.25'];
const TOOLS_DIR = fileURLToPath(new URL('..', import.meta.url));

interface Sizes {
  /** The ops whose cases the validate and kernels sections run (all when absent). */
  kernelOps?: string[];
  /** The real-size cases validate runs after those, checked on a sample (tools/kernel-lab/at-scale.ts): the shape
   *  and the ops (all when absent). */
  atScale: { shape: AtScaleShape; ops?: string[] };
  matmulLayouts: MatmulLayout[];
  kernelTargetMs?: number;
  matmul: number;
  trainConfigs: TrainBenchRow['config'][];
  trainSteps: number;
  generationConfigs: RolloutBenchRow['config'][];
  generationRuns: number;
  ppoStepArgs: string[];
}

const FULL: Sizes = {
  atScale: { shape: AT_SCALE },
  matmul: 4096,
  matmulLayouts: ['nt', 'nn', 'tn'],
  trainConfigs: ['tiny', 'small', 'gpt2-124m'],
  trainSteps: 5,
  generationConfigs: ['tiny', 'small'],
  generationRuns: 3,
  ppoStepArgs: ['--layers', '28', '--no-save'],
};
const TINY: Sizes = {
  kernelOps: ['rmsnorm'],
  // The real-size cases' code at a shape lavapipe runs in a second or two.
  atScale: { shape: { T: 256, NH: 4, NKV: 2, HS: 32, C: 64, V: 4096, cache: 512 } },
  matmulLayouts: ['nt', 'nn', 'tn'],
  kernelTargetMs: 20,
  matmul: 128,
  trainConfigs: ['tiny'],
  trainSteps: 1,
  generationConfigs: ['tiny'],
  generationRuns: 1,
  ppoStepArgs: ['--hidden', '128', '--layers', '1', '--no-save'],
};

/** --quick over the full or tiny sizes: one matmul layout, the tiny model's training step and generation once; of
 *  the real-size cases only attention's (seconds on a GPU; the LM head's 155M-value weight alone takes more). */
function quickSizes(sizes: Sizes): Sizes {
  return {
    ...sizes,
    atScale: { ...sizes.atScale, ops: ['attention'] },
    matmulLayouts: ['nt'],
    trainConfigs: ['tiny'],
    trainSteps: 1,
    generationConfigs: ['tiny'],
    generationRuns: 1,
  };
}

const TRAIN_CONFIGS: Record<TrainBenchRow['config'], DecoderConfig> = {
  tiny: BENCH_TINY,
  small: BENCH_SMALL,
  'gpt2-124m': BENCH_GPT2_124M,
};

function usageError(message: string): Error {
  return Object.assign(new Error(message), { usage: true });
}

export function parseReportArgs(argv: string[]): {
  tiny: boolean;
  quick: boolean;
  allowSoftware: boolean;
  skip: SectionName[];
  out: string;
} {
  const skip = (
    argv
      .find((a) => a.startsWith('--skip='))
      ?.slice('--skip='.length)
      .split(',') ?? []
  ).filter((s) => s.length > 0);
  for (const name of skip) {
    if (!(SECTIONS as readonly string[]).includes(name))
      throw usageError(`gpu-report: --skip=${name}: no such section (sections: ${SECTIONS.join(', ')})`);
  }
  for (const arg of argv.filter((a) => a.startsWith('--'))) {
    if (
      !['--tiny', '--quick', '--allow-software', '--json'].includes(arg) &&
      !arg.startsWith('--skip=') &&
      !arg.startsWith('--out=')
    ) {
      throw usageError(
        `gpu-report: unknown option ${arg} (options: --quick, --tiny, --allow-software, --skip=section,..., ` +
          '--out=FILE)',
      );
    }
  }
  return {
    tiny: argv.includes('--tiny'),
    quick: argv.includes('--quick'),
    allowSoftware: argv.includes('--allow-software'),
    skip: skip as SectionName[],
    out: argv.find((a) => a.startsWith('--out='))?.slice('--out='.length) || 'gpu-report.json',
  };
}

/** The run's outcome: the exit code and the report (null when refused before any section ran). */
export async function runGpuReport(
  engine: Engine,
  argv: string[],
  log: (line: string) => void = console.log,
): Promise<{ code: number; report: GpuReport | null }> {
  let args: ReturnType<typeof parseReportArgs>;
  try {
    args = parseReportArgs(argv);
  } catch (err) {
    console.error((err as Error).message);
    return { code: 2, report: null };
  }
  if (engine.caps.softwareAdapter && !args.allowSoftware) {
    console.error(
      `gpu-report: the adapter is a software one (${engine.caps.description}): its timings are a CPU's, not a GPU's ` +
        '(pass --allow-software to run it anyway, e.g. with --tiny as CI does)',
    );
    return { code: 1, report: null };
  }
  const sizes = args.quick ? quickSizes(args.tiny ? TINY : FULL) : args.tiny ? TINY : FULL;
  const budgets = { ...(args.tiny ? TINY_BUDGET_S : BUDGET_S), ...(args.quick ? QUICK_BUDGET_S : {}) };
  const peak = peakFp32Flops(engine.caps, engine.knobs.peakFlops);
  const bandwidth = peakBandwidth(engine.caps.description);
  const report: GpuReport = {
    mode: args.tiny ? 'tiny' : 'full',
    quick: args.quick,
    adapter: engine.caps.description,
    sections: [],
    summary: {},
  };
  const results: Partial<Record<SectionName, unknown>> = {};

  const bodies: Record<SectionName, (deadline: number) => Promise<{ result: unknown; reason?: string }>> = {
    adapter: async () => ({
      result: {
        description: engine.caps.description,
        software: engine.caps.softwareAdapter,
        default_limits: engine.caps.defaultLimits,
        limits: limitsOf(engine),
        features: {
          'shader-f16': engine.caps.shaderF16,
          subgroups: engine.caps.subgroups,
          'timestamp-query': engine.caps.timestampQuery,
          subgroup_min_size: engine.caps.subgroupMinSize,
        },
        memory: engine.memory,
        peak_fp32_flops: peak,
        peak_bytes_per_s: bandwidth,
      },
    }),
    validate: async (deadline) => {
      const cases = kernelCases(engine, sizes.kernelOps);
      await validateKernels(engine, cases);
      const { shape, ops } = sizes.atScale;
      const atScale = atScaleCases('sampled', shape).filter((c) => !ops || ops.includes(c.op));
      const runs = atScale.filter((c) => c.runsOn?.(engine) ?? true);
      const checked = await validateKernels(engine, runs, deadline);
      const left = [
        ...runs.slice(checked).map((c) => `${c.kernel}: budget spent`),
        ...atScale.filter((c) => !runs.includes(c)).map((c) => `${c.kernel}: ${c.shape} does not fit this device`),
      ];
      return {
        result: {
          cases: cases.length,
          checked: cases.length,
          at_scale: runs.slice(0, checked).map((c) => `${c.kernel} ${c.shape}`),
        },
        reason: left.length > 0 ? `real-size cases not checked: ${left.join('; ')}` : undefined,
      };
    },
    kernels: async (deadline) => {
      const all = kernelCases(engine, sizes.kernelOps).length;
      const rows = (
        await benchmarkKernels(engine, {
          only: sizes.kernelOps,
          baselines: false,
          targetMs: sizes.kernelTargetMs,
          deadline,
          // The validate section checked these cases; a report that skipped it checks them here.
          validate: !('validate' in results),
        })
      ).map((row) => withShares(row, peak, bandwidth));
      return {
        result: rows,
        reason: rows.length < all ? `budget spent after ${rows.length} of ${all} cases` : undefined,
      };
    },
    matmul: async () => ({ result: await timeLargeMatmul(engine, sizes.matmul, peak, sizes.matmulLayouts) }),
    train: async (deadline) => {
      const rows: TrainBenchRow[] = [];
      for (const config of sizes.trainConfigs) {
        if (performance.now() > deadline) return { result: rows, reason: `budget spent before ${config}` };
        rows.push(
          ...(await benchmarkTrainStep(engine, {
            configs: [config],
            microBatches: [1],
            steps: sizes.trainSteps,
            warmup: args.tiny ? 1 : 2,
          })),
        );
      }
      return { result: rows };
    },
    generation: async () => ({
      result: await benchmarkRollout(engine, {
        configs: sizes.generationConfigs,
        modes: ['kv-cache'],
        runs: sizes.generationRuns,
      }),
    }),
    'ppo-step': async () => ({ result: await ppoStep(sizes.ppoStepArgs, budgets['ppo-step']) }),
    torch: async () => {
      const torch = await torchStep(sizes, args.allowSoftware, budgets.torch);
      return 'skipped' in torch ? { result: null, reason: torch.skipped } : { result: torch };
    },
    'jax-js': async () => ({ result: await jaxMatmul(engine, sizes.matmul, peak) }),
  };

  // Replaced whole after every section: a lease cut short leaves the sections that finished.
  const write = async () => {
    const temporary = `${args.out}.partial`;
    await writeFile(temporary, `${JSON.stringify(report, null, 2)}\n`);
    await rename(temporary, args.out);
  };
  for (const section of SECTIONS) {
    const budget = budgets[section];
    const start = performance.now();
    let entry: SectionReport;
    if (args.skip.includes(section)) {
      entry = { section, status: 'skipped', reason: 'asked (--skip)', seconds: 0, budget_s: budget };
    } else if (args.quick && !QUICK_SECTIONS.includes(section)) {
      entry = { section, status: 'skipped', reason: 'not in --quick', seconds: 0, budget_s: 0 };
    } else {
      try {
        // --tiny starts every case whatever the time (the budget still stops a child process and the reason says
        // when it was overrun): the smoke run is there to check the code, and which cases ran would otherwise vary
        // with the machine's load (lavapipe on an empty shader cache: validate 8.5 s of its 10 at load 7).
        const { result, reason } = await bodies[section](args.tiny ? Infinity : start + budget * 1000);
        const seconds = (performance.now() - start) / 1000;
        // torch reports "skipped" as a result of its own (no torch, no CUDA): a reason and no result.
        const skipped = result === null;
        entry = {
          section,
          status: skipped ? 'skipped' : 'ok',
          seconds,
          budget_s: budget,
          ...(skipped ? {} : { result }),
        };
        const over = seconds > budget ? `took ${seconds.toFixed(0)} s of a ${budget} s budget` : undefined;
        const why = [reason, over].filter((s) => s !== undefined).join('; ');
        if (why) entry.reason = why;
        if (!skipped) results[section] = result;
      } catch (err) {
        entry = {
          section,
          status: 'failed',
          reason: (err as Error).message.split('\n')[0],
          seconds: (performance.now() - start) / 1000,
          budget_s: budget,
        };
      }
    }
    report.sections.push(entry);
    report.summary = summarize(results);
    await write();
    log(
      `[${section}] ${entry.status} in ${entry.seconds.toFixed(1)} ` +
        `s${entry.reason ? ` (${entry.reason})` : ''}${headline(section, entry)}`,
    );
  }
  for (const [key, value] of Object.entries(report.summary)) log(`  ${key}: ${value.toPrecision(4)}`);
  log(`wrote ${args.out}`);
  const failed = report.sections.filter((s) => s.status === 'failed').map((s) => s.section);
  if (failed.length > 0) console.error(`gpu-report: ${failed.join(', ')} failed (see ${args.out})`);
  return { code: failed.length > 0 ? 1 : 0, report };
}

function limitsOf(engine: Engine): Record<string, number> {
  const {
    maxBufferSize,
    maxStorageBufferBindingSize,
    maxStorageBuffersPerShaderStage,
    maxComputeWorkgroupStorageSize,
    maxComputeInvocationsPerWorkgroup,
    maxComputeWorkgroupsPerDimension,
    minStorageBufferOffsetAlignment,
  } = engine.caps;
  return {
    maxBufferSize,
    maxStorageBufferBindingSize,
    maxStorageBuffersPerShaderStage,
    maxComputeWorkgroupStorageSize,
    maxComputeInvocationsPerWorkgroup,
    maxComputeWorkgroupsPerDimension,
    minStorageBufferOffsetAlignment,
  };
}

/** A kernel row with its share of the card's peak FLOP/s (flops rows) or bandwidth (bytes rows), where known. */
function withShares(
  row: KernelBenchRow,
  peak: number | null,
  bandwidth: number | null,
): KernelBenchRow & { peak_share?: number; bandwidth_share?: number } {
  return {
    ...row,
    ...(row.gflops !== undefined && peak !== null ? { peak_share: (row.gflops * 1e9) / peak } : {}),
    ...(row.gbps !== undefined && bandwidth !== null ? { bandwidth_share: (row.gbps * 1e9) / bandwidth } : {}),
  };
}

/**
 * The engine's fp32 matmul at n³ in each of `layouts` (the issue's target: at least half the fp32 peak at 4096³), on
 * seeded random inputs, each layout's output checked by Freivalds' probes before it is timed.
 */
async function timeLargeMatmul(
  engine: Engine,
  n: number,
  peak: number | null,
  layouts: readonly MatmulLayout[],
): Promise<(KernelBenchRow & { peak_share?: number })[]> {
  const rows = [];
  for (const layout of layouts) {
    const { run, check, tensors } = matmulBench(engine, layout, n, n, n);
    try {
      run();
      const result = await check();
      if (!(result.violation <= 1))
        throw new Error(
          `kernel matmul ${layout} ${n}x${n}x${n}: out off by ${result.maxAbsError.toPrecision(3)} (${result.tolerance})`,
        );
      const row = await timeKernel(engine, `matmul ${layout}`, `${n}x${n}x${n}`, run, {
        flops: 2 * n ** 3,
        samples: 3,
      });
      rows.push(withShares(row, peak, null));
    } finally {
      for (const t of tensors) engine.destroyTensor(t);
    }
  }
  return rows;
}

/** Runs `command` with a hard limit of `budgetS` seconds; stdout, or an error naming what happened. */
function runChild(command: string, args: string[], budgetS: number, what: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      command,
      args,
      { timeout: budgetS * 1000, killSignal: 'SIGKILL', maxBuffer: 64 << 20 },
      (err, stdout, stderr) => {
        if (!err) return resolve(stdout);
        const { killed, code } = err as { killed?: boolean; code?: unknown };
        const last = `${stderr}`.trim().split('\n').pop() ?? '';
        // The code stays on the error: ENOENT (no such program) is a reason to skip, not a failure.
        reject(
          Object.assign(
            new Error(
              killed
                ? `${what}: stopped at its budget of ${budgetS} s`
                : `${what}: exit ${code}: ${last || err.message}`,
            ),
            { code },
          ),
        );
      },
    );
  });
}

export interface PpoStepResult {
  /** The memory plan's first lines as train.js printed them (peak, budget and what the budget is). */
  memory_plan: string[];
  /** perf/* and timing_s/* of the step, from its metrics.jsonl. */
  metrics: Record<string, number>;
}

/** The memory plan's header lines and the step's perf/ and timing_s/ metrics, from what train.js wrote. */
export function readPpoStep(stdout: string, metricsJsonl: string): PpoStepResult {
  const lines = stdout.split('\n');
  const at = lines.findIndex((l) => l.startsWith('memory plan:'));
  const records = metricsJsonl
    .trim()
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l) as { step: number; data: Record<string, number> });
  if (at < 0 || records.length === 0)
    throw new Error('ppo-step: train.js printed no memory plan or wrote no step metrics');
  const data = records[records.length - 1].data;
  return {
    memory_plan: lines.slice(at, at + 2),
    metrics: Object.fromEntries(
      Object.entries(data).filter(([k]) => k.startsWith('perf/') || k.startsWith('timing_s/')),
    ),
  };
}

/** One PPO step at Qwen3-0.6B's shape (tools/qwen3-ppo-step.ts: real tokenizer, GAE critic) in a child process. */
async function ppoStep(stepArgs: string[], budgetS: number): Promise<PpoStepResult> {
  const root = await mkdtemp(join(tmpdir(), 'gpu-report-ppo-'));
  try {
    const stdout = await runChild(
      process.execPath,
      [join(TOOLS_DIR, 'qwen3-ppo-step.js'), ...stepArgs, '--keep', root],
      budgetS,
      'ppo-step',
    );
    return readPpoStep(stdout, await readFile(join(root, 'run', 'metrics.jsonl'), 'utf8'));
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

interface TorchResult {
  device: string;
  torch: string;
  train: { config: string; tokens_per_s: number }[];
  generation: { config: string; tokens_per_s: number }[];
  matmul: { shape: string; gflops: number }[];
}

/** tools/bench/torch_step.py on the same shapes; { skipped } when python3 or torch or CUDA is not there. */
async function torchStep(sizes: Sizes, allowCpu: boolean, budgetS: number): Promise<TorchResult | { skipped: string }> {
  const spec = {
    configs: sizes.trainConfigs.map((name) => {
      const c = TRAIN_CONFIGS[name];
      return {
        name,
        layers: c.numLayers,
        hidden: c.hiddenSize,
        heads: c.numHeads,
        kv_heads: c.numKvHeads,
        intermediate: c.intermediateSize,
        vocab: c.vocabSize,
        tie: c.tieWordEmbeddings,
      };
    }),
    batch: 8,
    seq_len: 128,
    steps: sizes.trainSteps,
    warmup: 1,
    gen: { configs: sizes.generationConfigs, batch: 8, prompt_len: 16, new_tokens: 112, runs: sizes.generationRuns },
    matmul: [[sizes.matmul, sizes.matmul, sizes.matmul]],
    allow_cpu: allowCpu,
  };
  let stdout: string;
  try {
    stdout = await runChild(
      'python3',
      [join(TOOLS_DIR, 'bench', 'torch_step.py'), JSON.stringify(spec)],
      budgetS,
      'torch',
    );
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { skipped: 'no python3 on PATH' };
    throw err;
  }
  return JSON.parse(stdout.trim().split('\n').pop()!) as TorchResult | { skipped: string };
}

// jax-js has no types here (it lives outside the project); the few calls below are checked by running them.
type Jax = any;

/**
 * jax-js's jit-compiled fp32 matmul (A·B, our nn layout) at n³ on the engine's adapter, and the engine's nn beside it.
 */
async function jaxMatmul(engine: Engine, n: number, peak: number | null): Promise<Record<string, number | string>> {
  let dir: string;
  try {
    dir = peerFolder('JAXJS_DIR', JAXJS_PACKAGES, '@jax-js/jax');
  } catch (err) {
    throw new Error(
      `jax-js: npm could not install ${JAXJS_PACKAGES.join(' ')} (no registry? set JAXJS_DIR to a folder that has ` +
        `it): ${(err as Error).message.split('\n')[0]}`,
    );
  }
  await shareDawnWithPeers();
  const jax: Jax = await import(pathToFileURL(join(dir, 'node_modules', '@jax-js', 'jax', 'dist', 'index.js')).href);
  const devices: string[] = await jax.init();
  if (!devices.includes('webgpu')) throw new Error(`jax-js: no webgpu device (it found ${devices.join(', ')})`);
  jax.defaultDevice('webgpu');
  const np = jax.numpy;
  const values = Float32Array.from({ length: n * n }, (_, i) => ((i * 7919) % 1000) / 1000 - 0.5);
  const a = np.array(values).reshape([n, n]);
  const b = np.array(values).reshape([n, n]);
  const product = jax.jit((x: Jax, y: Jax) => np.matmul(x, y));
  // Arrays are reference-counted: each call takes a reference (.ref) and each result is disposed.
  const runs = async (count: number) => {
    const start = performance.now();
    let c = product(a.ref, b.ref);
    for (let i = 1; i < count; i++) {
      c.dispose();
      c = product(a.ref, b.ref);
    }
    await c.blockUntilReady();
    c.dispose();
    return (performance.now() - start) / count;
  };
  const first = await runs(1);
  const reps = Math.max(1, Math.min(100, Math.round(200 / Math.max(await runs(1), 1e-3))));
  const samples = [await runs(reps), await runs(reps), await runs(reps)].sort((x, y) => x - y);
  const ms = samples[1];
  a.dispose();
  b.dispose();
  const [ours] = await timeLargeMatmul(engine, n, peak, ['nn']);
  const gflops = (2 * n ** 3) / ms / 1e6;
  return {
    version: JAXJS_PACKAGES[0],
    shape: `${n}x${n}x${n}`,
    first_call_ms: first,
    ms,
    gflops,
    ...(peak !== null ? { peak_share: (gflops * 1e9) / peak } : {}),
    ours_nn_gflops: ours.gflops!,
    ours_over_jax: ours.gflops! / gflops,
  };
}

/** One figure for a section's line. */
function headline(section: SectionName, entry: SectionReport): string {
  if (entry.status !== 'ok') return '';
  const r = entry.result as any;
  const pct = (share: number | undefined) => (share === undefined ? '' : ` (${(100 * share).toFixed(1)}% of peak)`);
  switch (section) {
    case 'adapter':
      return `: ${r.description}; ${r.memory.label}`;
    case 'validate':
      return (
        `: ${r.checked} of ${r.cases} kernel cases match their references, and ${r.at_scale.length} real-size ` +
        'cases on a sample'
      );
    case 'kernels':
      return `: ${r.length} kernels`;
    case 'matmul':
      return `: ${r.map((row: any) => `${row.kernel} ${row.gflops.toFixed(0)} GFLOP/s${pct(row.peak_share)}`).join(', ')}`;
    case 'train':
    case 'generation':
      return `: ${r.map((row: any) => `${row.config} ${row.tokens_per_s.toFixed(0)} tokens/s`).join(', ')}`;
    case 'ppo-step':
      return `: ${r.memory_plan[0] ?? ''}`;
    case 'torch':
      return `: ${r.device}, torch ${r.torch}`;
    case 'jax-js':
      return `: ${r.gflops.toFixed(0)} GFLOP/s at ${r.shape}, ours/jax-js ${r.ours_over_jax.toFixed(2)}`;
  }
}

/** The ratios the issue asks about: matmul's share of peak, ours over PyTorch eager, ours over jax-js. */
function summarize(results: Partial<Record<SectionName, unknown>>): Record<string, number> {
  const summary: Record<string, number> = {};
  const matmulRows = results.matmul as (KernelBenchRow & { peak_share?: number })[] | undefined;
  for (const row of matmulRows ?? [])
    if (row.peak_share !== undefined) summary[`${row.kernel} ${row.shape} share of fp32 peak`] = row.peak_share;
  const torch = results.torch as TorchResult | undefined;
  for (const row of (results.train as TrainBenchRow[] | undefined) ?? []) {
    const theirs = torch?.train.find((t) => t.config === row.config);
    if (theirs)
      summary[`train step ${row.config}: ours / torch eager fp32 tokens/s`] = row.tokens_per_s / theirs.tokens_per_s;
  }
  for (const row of (results.generation as RolloutBenchRow[] | undefined) ?? []) {
    const theirs = torch?.generation.find((t) => t.config === row.config);
    if (theirs)
      summary[`generation ${row.config}: ours / torch eager fp32 tokens/s`] = row.tokens_per_s / theirs.tokens_per_s;
  }
  const cublas = torch?.matmul[0];
  const ours = matmulRows?.find((r) => r.kernel === 'matmul nt');
  if (cublas && ours?.gflops !== undefined)
    summary[`matmul nt ${ours.shape}: ours / cuBLAS fp32`] = ours.gflops / cublas.gflops;
  const jax = results['jax-js'] as { ours_over_jax: number; shape: string } | undefined;
  if (jax) summary[`matmul nn ${jax.shape}: ours / jax-js`] = jax.ours_over_jax;
  const ppo = results['ppo-step'] as PpoStepResult | undefined;
  if (ppo?.metrics['perf/max_memory_allocated_gb'] !== undefined)
    summary['ppo step: peak memory GiB'] = ppo.metrics['perf/max_memory_allocated_gb'];
  return summary;
}
