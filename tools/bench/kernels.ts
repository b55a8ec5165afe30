// `node tools/bench.js kernels`: per-kernel timings at the shapes the model runs (the "tiny" benchmark config: batch 8
// x 128 tokens, hidden 128, 4 / 2 heads of 32, SwiGLU 384, vocab 512; PPO kernels at 256 sequences x 128 response
// tokens). Each op's cases live beside its lab, in tools/kernel-lab/<op>.bench.ts. A case with a naive GPU variant is
// timed twice and reports vs_naive; the others carry the op's CPU reference (kernels/<family>/<op>.ref.ts) on the same
// inputs and report vs_cpu, its time over the kernel's, where one reference run takes at most a few seconds.
import type { Engine } from '../../engine/index.ts';
import { timeKernel, timeReference, withVariant, type KernelBenchRow } from './harness.ts';
import { matmulCases } from '../kernel-lab/matmul.bench.ts';
import { embeddingCases } from '../kernel-lab/embedding.bench.ts';
import { rmsnormCases } from '../kernel-lab/rmsnorm.bench.ts';
import { headRmsnormCases } from '../kernel-lab/head-rmsnorm.bench.ts';
import { ropeCases } from '../kernel-lab/rope.bench.ts';
import { attentionCases } from '../kernel-lab/attention.bench.ts';
import { swigluCases } from '../kernel-lab/swiglu.bench.ts';
import { lmHeadCases } from '../kernel-lab/lm-head.bench.ts';
import { valueHeadCases } from '../kernel-lab/value-head.bench.ts';
import { adamwCases } from '../kernel-lab/adamw.bench.ts';
import { adamw8bitCases } from '../kernel-lab/adamw8bit.bench.ts';
import { weightedSumCases } from '../kernel-lab/reduce.bench.ts';
import { transposeCases } from '../kernel-lab/transpose.bench.ts';
import { clearRangesCases } from '../kernel-lab/clear-ranges.bench.ts';
import { ppoCases } from '../kernel-lab/ppo.bench.ts';
import { decodeLayerCases } from '../kernel-lab/decode-layer.bench.ts';
import type { KernelBenchCase } from '../kernel-lab/bench-inputs.ts';

export type { KernelBenchRow } from './harness.ts';

const CASES: (() => KernelBenchCase[])[] = [
  matmulCases,
  embeddingCases,
  rmsnormCases,
  headRmsnormCases,
  ropeCases,
  attentionCases,
  swigluCases,
  lmHeadCases,
  valueHeadCases,
  adamwCases,
  adamw8bitCases,
  weightedSumCases,
  transposeCases,
  clearRangesCases,
  ppoCases,
  decodeLayerCases,
];

export interface KernelBenchOptions {
  /** The cases of these ops only (as WEBGPU_KERNEL_VARIANTS names them: `--only=value-head,reduce`). */
  only?: readonly string[];
  /** Time the naive variant and the CPU reference too (vs_naive, vs_cpu); default true. */
  baselines?: boolean;
  /** Milliseconds of one sample (harness.ts timeKernel). */
  targetMs?: number;
  /** performance.now() after which no further case starts (the GPU report's budget). */
  deadline?: number;
  /** Check the cases before timing them (validateKernels); default true. The GPU report's validate section did. */
  validate?: boolean;
}

/** The cases this device runs, of the ops `only` names or all. */
export function kernelCases(engine: Engine, only?: readonly string[]): KernelBenchCase[] {
  return CASES.flatMap((cases) => cases()).filter(
    (c) => (!only || only.includes(c.op)) && (c.runsOn?.(engine) ?? true),
  );
}

/**
 * Runs each case once and compares its output with the reference at the case's own shape; throws at the first that
 * is off (`kernel <kernel> <shape>: <output> off by <max abs error> (...)`), so nothing wrong is timed.
 */
export async function validateKernels(engine: Engine, cases: readonly KernelBenchCase[]): Promise<void> {
  for (const benchCase of cases) {
    const { run, check } = benchCase.setup(engine);
    run();
    const result = await check();
    if (!(result.violation <= 1))
      throw new Error(
        `kernel ${benchCase.kernel} ${benchCase.shape}: ${result.output} off by ${result.maxAbsError.toPrecision(3)} ` +
          `(${result.violation.toPrecision(3)}× the tolerance, ${result.tolerance})`,
      );
  }
}

/** A row per case, in order, until `deadline`; every case is validated first (validateKernels). */
export async function benchmarkKernels(
  engine: Engine,
  options: KernelBenchOptions = {},
  log: (line: string) => void = () => {},
): Promise<KernelBenchRow[]> {
  const { baselines = true, targetMs, deadline = Infinity, validate = true } = options;
  const cases = kernelCases(engine, options.only);
  if (validate) {
    await validateKernels(engine, cases);
    log('All results match. Starting benchmarks.');
  }
  const rows: KernelBenchRow[] = [];
  for (const benchCase of cases) {
    if (performance.now() > deadline) break;
    const { run } = benchCase.setup(engine);
    const time = (samples?: number) =>
      timeKernel(engine, benchCase.kernel, benchCase.shape, run, {
        flops: benchCase.flops,
        bytes: benchCase.bytes,
        samples,
        targetMs,
      });
    const row = await time();
    if (baselines && benchCase.naiveVariant) {
      const naive = await withVariant(engine, benchCase.op, benchCase.naiveVariant, () => time(3));
      row.vs_naive = naive.ms / row.ms;
    }
    if (baselines && benchCase.reference) row.vs_cpu = timeReference(benchCase.reference) / row.ms;
    rows.push(row);
  }
  return rows;
}
