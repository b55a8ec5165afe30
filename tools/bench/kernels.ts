// `node tools/bench.js kernels`: per-kernel timings at the shapes the model runs (the "tiny" benchmark config:
// batch 8 x 128 tokens, hidden 128, 4 / 2 heads of 32, SwiGLU 384, vocab 512; PPO kernels at 256 sequences x 128
// response tokens). Each op's cases live beside its lab, in tools/kernel-lab/<op>.bench.ts. A case with a naive
// GPU variant is timed twice and reports vs_naive; the others carry the op's CPU reference (kernels/<family>/<op>.ref.ts) on the
// same inputs and report vs_cpu, its time over the kernel's, where one reference run takes at most a few seconds.
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
import { weightedSumCases } from '../kernel-lab/reduce.bench.ts';
import { transposeCases } from '../kernel-lab/transpose.bench.ts';
import { clearRangesCases } from '../kernel-lab/clear-ranges.bench.ts';
import { ppoCases } from '../kernel-lab/ppo.bench.ts';
import { decodeLayerCases } from '../kernel-lab/decode-layer.bench.ts';
import type { KernelBenchCase } from '../kernel-lab/bench-inputs.ts';

export type { KernelBenchRow } from './harness.ts';

const CASES: (() => KernelBenchCase[])[] = [
  matmulCases, embeddingCases, rmsnormCases, headRmsnormCases, ropeCases, attentionCases, swigluCases, lmHeadCases,
  valueHeadCases, adamwCases, weightedSumCases, transposeCases, clearRangesCases, ppoCases, decodeLayerCases,
];

/** Every case, or with `only` the cases of those ops (as WEBGPU_KERNEL_VARIANTS names them: `--only=value-head,reduce`). */
export async function benchmarkKernels(engine: Engine, only?: readonly string[]): Promise<KernelBenchRow[]> {
  const rows: KernelBenchRow[] = [];
  for (const benchCase of CASES.flatMap((cases) => cases()).filter((c) => (!only || only.includes(c.op)) && (c.runsOn?.(engine) ?? true))) {
    const run = benchCase.setup(engine);
    const time = (samples?: number) =>
      timeKernel(engine, benchCase.kernel, benchCase.shape, run, { flops: benchCase.flops, bytes: benchCase.bytes, samples });
    const row = await time();
    if (benchCase.naiveVariant) {
      const naive = await withVariant(engine, benchCase.op, benchCase.naiveVariant, () => time(3));
      row.vs_naive = naive.ms / row.ms;
    }
    if (benchCase.reference) row.vs_cpu = timeReference(benchCase.reference) / row.ms;
    rows.push(row);
  }
  return rows;
}
