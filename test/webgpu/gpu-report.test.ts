// The GPU report's CI smoke run (`node tools/bench.js gpu-report --tiny --allow-software`) on this adapter: every
// section in order, each ok or skipped with its reason, the JSON file the same as the report; the PPO step (two
// minutes on lavapipe even at hidden 128: Qwen3's 151,936-word head) and jax-js (npm registry) are skipped here.
// --quick: its five sections, whose budgets make 110 s, the report on disk after each. (At tiny sizes every case
// runs whatever its time, so no verdict here depends on the machine's load.)
// On a software adapter the report refuses to run unless asked.
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gpuEngine } from '../support/gpu-engine.ts';
import { runGpuReport, QUICK_SECTIONS, SECTIONS } from '../../tools/bench/gpu-report.ts';

describe('gpu-report --tiny', () => {
  it('refuses a software adapter unless --allow-software', async () => {
    const engine = await gpuEngine();
    if (!engine.caps.softwareAdapter) return;
    const dir = await mkdtemp(join(tmpdir(), 'gpu-report-'));
    try {
      expect(await runGpuReport(engine, ['--tiny', `--out=${join(dir, 'r.json')}`], () => {})).toEqual({
        code: 1,
        report: null,
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('runs every section at tiny sizes and writes the report it returns', async () => {
    const engine = await gpuEngine();
    const dir = await mkdtemp(join(tmpdir(), 'gpu-report-'));
    const out = join(dir, 'report.json');
    const lines: string[] = [];
    try {
      const { code, report } = await runGpuReport(
        engine,
        ['--tiny', '--allow-software', '--skip=ppo-step,jax-js', `--out=${out}`],
        (l) => lines.push(l),
      );
      expect(code, lines.join('\n')).toBe(0);
      expect(JSON.parse(await readFile(out, 'utf8'))).toEqual(report);
      const sections = Object.fromEntries(report!.sections.map((s) => [s.section, s]));
      expect(report!.sections.map((s) => s.section)).toEqual([...SECTIONS]);
      expect(sections['ppo-step']).toMatchObject({ status: 'skipped', reason: 'asked (--skip)' });
      expect(sections['jax-js']).toMatchObject({ status: 'skipped', reason: 'asked (--skip)' });
      // torch runs where python3 imports it (on the CPU here, asked by --allow-software), else says why not.
      expect(sections.torch.status === 'ok' || /torch|python3/.test(sections.torch.reason ?? '')).toBe(true);
      for (const name of ['adapter', 'validate', 'kernels', 'matmul', 'train', 'generation'] as const)
        expect(sections[name].status, name).toBe('ok');
      // The real-size cases' code runs at tiny sizes after the benchmark cases, each checked on a sample.
      expect(sections.validate.result).toEqual({
        cases: 2,
        checked: 2,
        at_scale: [
          'attention forward B=1,T=256,NH=4,NKV=2,HS=32',
          'attention backward B=1,T=256,NH=4,NKV=2,HS=32',
          'lm-head forward N=16,C=64,V=4096',
          'lm-head backward N=16,C=64,V=4096',
          'decode attention B=2,NH=4,NKV=2,HS=32,slot 511 of 512',
          'sample rows=4,V=4096',
        ],
      });
      expect(sections.adapter.result).toMatchObject({ description: engine.caps.description, memory: engine.memory });
      const kernels = sections.kernels.result as { kernel: string; gbps: number }[];
      expect(kernels.map((k) => k.kernel)).toEqual(['rmsnorm forward', 'rmsnorm backward']);
      expect(kernels.every((k) => k.gbps > 0)).toBe(true);
      const matmul = sections.matmul.result as { kernel: string; shape: string; gflops: number; peak_share?: number }[];
      expect(matmul.map((m) => `${m.kernel} ${m.shape}`)).toEqual([
        'matmul nt 128x128x128',
        'matmul nn 128x128x128',
        'matmul tn 128x128x128',
      ]);
      // Every adapter the peak table knows (lavapipe's measured rate included) gives each matmul its share of peak.
      if (engine.caps.softwareAdapter)
        expect(Object.keys(report!.summary)).toContain('matmul nt 128x128x128 share of fp32 peak');
      expect(sections.train.result).toEqual([expect.objectContaining({ config: 'tiny', batch: 8, seq_len: 128 })]);
      expect(sections.generation.result).toEqual([
        expect.objectContaining({ config: 'tiny', mode: 'kv-cache', new_tokens: 112 }),
      ]);
      expect(lines.filter((l) => l.startsWith('['))).toHaveLength(SECTIONS.length);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('--quick runs the first five sections, 110 s of budgets, the report written after each', async () => {
    const engine = await gpuEngine();
    const dir = await mkdtemp(join(tmpdir(), 'gpu-report-'));
    const out = join(dir, 'report.json');
    const written: string[][] = [];
    try {
      const { code, report } = await runGpuReport(
        engine,
        ['--tiny', '--quick', '--allow-software', `--out=${out}`],
        (line) => {
          // Each section's line comes after its report is on disk: what a lease cut there would keep.
          if (line.startsWith('['))
            written.push(JSON.parse(readFileSync(out, 'utf8')).sections.map((s: { section: string }) => s.section));
        },
      );
      expect(code).toBe(0);
      expect(report!.quick).toBe(true);
      expect(written).toEqual(SECTIONS.map((_, i) => SECTIONS.slice(0, i + 1)));
      const ran = report!.sections.filter((s) => s.status !== 'skipped');
      expect(ran.map((s) => s.section)).toEqual([...QUICK_SECTIONS]);
      expect(ran.every((s) => s.status === 'ok')).toBe(true);
      expect(ran.reduce((sum, s) => sum + s.budget_s, 0)).toBeLessThanOrEqual(120);
      const matmul = report!.sections.find((s) => s.section === 'matmul')!.result as { kernel: string }[];
      expect(matmul.map((m) => m.kernel)).toEqual(['matmul nt']);
      // Of the real-size cases, --quick runs attention's only.
      const validate = report!.sections.find((s) => s.section === 'validate')!.result as { at_scale: string[] };
      expect(validate.at_scale.map((c) => c.split(' B=')[0])).toEqual(['attention forward', 'attention backward']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
