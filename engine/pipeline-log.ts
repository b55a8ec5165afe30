// WEBGPU_PIPELINE_LOG=<file>: every pipeline an engine creates is appended to <file> as one JSON line, so
// `node tools/bench.js compile <file>` can compile exactly the set a run (the test suite, a job, a bench) used,
// on an empty shader cache. Node only: the browser demo never sets the knob.
import { generateDeclarations, uniformByteSize, type KernelSpec } from './kernel.ts';

export interface PipelineRecord {
  name: string;
  /** The whole WGSL as the engine compiles it (generated declarations + source). */
  code: string;
  entryPoint: string;
  constants: Record<string, number>;
  /** Access of each storage binding after the uniform at binding 0. */
  bindings: ('read' | 'read_write')[];
  uniformBytes: number;
}

export function pipelineRecord(spec: KernelSpec): PipelineRecord {
  return {
    name: spec.name,
    code: generateDeclarations(spec) + spec.source,
    entryPoint: spec.entryPoint ?? 'main',
    constants: { ...spec.constants },
    bindings: spec.bindings.map((b) => b.access),
    uniformBytes: uniformByteSize(spec),
  };
}

/** Identity of a pipeline to the shader compiler: code, entry point and constants. */
export function pipelineKey(record: PipelineRecord): string {
  return JSON.stringify([record.code, record.entryPoint, Object.entries(record.constants).sort()]);
}

/** A writer appending records to `path` (created if missing); appends of whole lines, so test workers may share it. */
export async function openPipelineLog(path: string): Promise<(spec: KernelSpec) => void> {
  const fsModule = 'node:fs';
  // Typed by hand: the demo's build (a browser) has no Node types.
  const { appendFileSync } = (await import(/* @vite-ignore */ fsModule)) as {
    appendFileSync: (path: string, data: string) => void;
  };
  return (spec) => appendFileSync(path, `${JSON.stringify(pipelineRecord(spec))}\n`);
}
