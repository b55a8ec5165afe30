// The GPU report's inputs: its options (an unknown section or option is one line naming it) and what it reads from
// the PPO step's child process (train.js's memory plan lines and the step's perf/ and timing_s/ metrics).
import { describe, it, expect } from 'vitest';
import { parseReportArgs, readPpoStep } from '../../tools/bench/gpu-report.ts';

describe('gpu-report inputs', () => {
  it('parses its options and names a bad one', () => {
    expect(parseReportArgs(['--tiny', '--skip=torch,jax-js', '--out=r.json'])).toEqual({
      tiny: true,
      quick: false,
      allowSoftware: false,
      skip: ['torch', 'jax-js'],
      out: 'r.json',
    });
    expect(parseReportArgs([])).toEqual({
      tiny: false,
      quick: false,
      allowSoftware: false,
      skip: [],
      out: 'gpu-report.json',
    });
    expect(parseReportArgs(['--quick']).quick).toBe(true);
    expect(() => parseReportArgs(['--skip=pytorch'])).toThrow(
      /^gpu-report: --skip=pytorch: no such section \(sections: adapter, validate, matmul, train, generation, kernels, torch, ppo-step, jax-js\)$/,
    );
    expect(() => parseReportArgs(['--fast'])).toThrow(/^gpu-report: unknown option --fast/);
  });

  it("reads the memory plan header and the last step's perf and timing metrics", () => {
    const stdout = [
      'wrote /tmp/m',
      'memory plan: resident 5.22 GiB, peak 5.28 GiB of a 80.00 GiB budget, …',
      '  budget: device memory of H100: 80 GiB (table)',
      '  actor parameters 0.64 GiB',
    ].join('\n');
    const metrics = JSON.stringify({
      step: 1,
      data: { 'perf/max_memory_allocated_gb': 5.29, 'timing_s/gen': 31, 'actor/pg_loss': 0.1 },
    });
    expect(readPpoStep(stdout, `${metrics}\n`)).toEqual({
      memory_plan: [
        'memory plan: resident 5.22 GiB, peak 5.28 GiB of a 80.00 GiB budget, …',
        '  budget: device memory of H100: 80 GiB (table)',
      ],
      metrics: { 'perf/max_memory_allocated_gb': 5.29, 'timing_s/gen': 31 },
    });
    expect(() => readPpoStep('no plan', metrics)).toThrow(
      /^ppo-step: train.js printed no memory plan or wrote no step metrics$/,
    );
  });
});
