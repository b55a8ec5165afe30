// `node tools/bench.js compile <pipelines.jsonl>`: cold shader compilation of a recorded pipeline set. Record the
// set with WEBGPU_PIPELINE_LOG=<file> on any run (e.g. `npm test`); this compiles each distinct pipeline once on
// an empty Mesa shader cache (a fresh MESA_SHADER_CACHE_DIR, set by cli.ts before the device exists) and prints
// the total and the slowest. lavapipe compiles at a pipeline's first dispatch, not at creation, so each one is
// created, dispatched once (one workgroup, zero uniforms, small zero buffers: loops bounded by uniforms do
// nothing) and waited for; the time is the creation plus that submit.
import { readFileSync } from 'node:fs';
import type { Engine } from '../../engine/index.ts';
import { pipelineKey, type PipelineRecord } from '../../engine/pipeline-log.ts';

export interface CompileRow {
  kernel: string;
  /** Literal consts prepended to the source (e.g. HS=32) and the pipeline's override constants. */
  constants: string;
  ms: number;
}

function describeConstants(record: PipelineRecord): string {
  const consts = [...record.code.matchAll(/^const (\w+): (?:u32|bool) = (\w+?)u?;$/gm)].map(
    ([, name, value]) => `${name}=${value}`,
  );
  return [...consts, ...Object.entries(record.constants).map(([name, value]) => `${name}=${value}`)].join(',');
}

const DUMMY_BYTES = 4096;

export function readPipelineLog(path: string): PipelineRecord[] {
  const unique = new Map<string, PipelineRecord>();
  readFileSync(path, 'utf8')
    .split('\n')
    .forEach((line, i) => {
      if (line.trim() === '') return;
      let record: PipelineRecord;
      try {
        record = JSON.parse(line) as PipelineRecord;
      } catch {
        throw new Error(`${path}:${i + 1}: not a JSON pipeline record (write the file with WEBGPU_PIPELINE_LOG)`);
      }
      unique.set(pipelineKey(record), record);
    });
  return [...unique.values()];
}

async function compileOnce(engine: Engine, record: PipelineRecord): Promise<number> {
  const device = engine.device;
  const start = performance.now();
  const layout = device.createBindGroupLayout({
    entries: [
      { binding: 0, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'uniform' } },
      ...record.bindings.map((access, i) => ({
        binding: i + 1,
        visibility: GPUShaderStage.COMPUTE,
        buffer: { type: access === 'read' ? ('read-only-storage' as const) : ('storage' as const) },
      })),
    ],
  });
  const pipeline = device.createComputePipeline({
    label: record.name,
    layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }),
    compute: {
      module: device.createShaderModule({ label: record.name, code: record.code }),
      entryPoint: record.entryPoint,
      constants: record.constants,
    },
  });
  const uniform = device.createBuffer({ size: record.uniformBytes, usage: GPUBufferUsage.UNIFORM });
  const storage = record.bindings.map(() => device.createBuffer({ size: DUMMY_BYTES, usage: GPUBufferUsage.STORAGE }));
  const bindGroup = device.createBindGroup({
    layout,
    entries: [uniform, ...storage].map((buffer, binding) => ({ binding, resource: { buffer } })),
  });
  const encoder = device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, bindGroup);
  pass.dispatchWorkgroups(1);
  pass.end();
  device.queue.submit([encoder.finish()]);
  await device.queue.onSubmittedWorkDone();
  const ms = performance.now() - start;
  for (const buffer of [uniform, ...storage]) buffer.destroy();
  return ms;
}

/**
 * Compiles each record (readPipelineLog: the distinct pipelines of a log); rows slowest first, then one row per kernel
 * name, then the total.
 */
export async function benchmarkCompile(engine: Engine, records: readonly PipelineRecord[]): Promise<CompileRow[]> {
  const rows: CompileRow[] = [];
  for (const [i, record] of records.entries()) {
    const row = { kernel: record.name, constants: describeConstants(record), ms: await compileOnce(engine, record) };
    // Progress on stderr: a cold run takes minutes.
    console.error(`${i + 1}/${records.length} ${row.kernel} ${row.constants}: ${row.ms.toFixed(0)} ms`);
    rows.push(row);
  }
  rows.sort((a, b) => b.ms - a.ms);
  const byKernel = new Map<string, { ms: number; count: number }>();
  for (const row of rows) {
    const entry = byKernel.get(row.kernel) ?? { ms: 0, count: 0 };
    entry.ms += row.ms;
    entry.count += 1;
    byKernel.set(row.kernel, entry);
  }
  const kernels = [...byKernel.entries()]
    .sort((a, b) => b[1].ms - a[1].ms)
    .map(([kernel, { ms, count }]) => ({ kernel: `Σ ${kernel}`, constants: `${count} pipelines`, ms }));
  const total = rows.reduce((sum, row) => sum + row.ms, 0);
  return [...rows, ...kernels, { kernel: 'total', constants: `${rows.length} pipelines`, ms: total }];
}
