// Shared pieces of the row-wise ops (embedding, rmsnorm, head-rmsnorm, rope, swiglu): the
// WGSL one spec compiles from an op's .wgsl file, which has two needs:
// - Sections. The engine declares only the bindings of the spec being compiled, and WGSL resolves every
//   function of a module, so a forward and a backward with different bindings cannot share one module. A .wgsl
//   file with both therefore holds a shared part, then sections that each start with a line `//// <name>`.
// - Vector width. Each shader is written once against `vecN`; on lavapipe every storage load costs about a
//   dozen instructions whatever its width, so rows whose length allows it move as vec4, and other lengths run
//   the same code on scalars.
import type { ElementType } from '../../engine/kernel.ts';
import workgroupSumSource from './workgroup-sum.wgsl';
import columnGradSource from './column-grad.wgsl';

export type VectorWidth = 1 | 4;

/** 4 when every length is a multiple of 4, else 1. */
export function widestVector(...lengths: number[]): VectorWidth {
  return lengths.every((n) => n % 4 === 0) ? 4 : 1;
}

export function vectorElementType(width: VectorWidth): ElementType {
  return width === 4 ? 'vec4<f32>' : 'f32';
}

// `vecN` is the element type, `VW` its width, `hsum` the sum of its components.
const PRELUDES: Record<VectorWidth, string> = {
  4: 'alias vecN = vec4<f32>;\nconst VW = 4u;\nfn hsum(v: vecN) -> f32 { return dot(v, vec4<f32>(1.0)); }\n',
  1: 'alias vecN = f32;\nconst VW = 1u;\nfn hsum(v: vecN) -> f32 { return v; }\n',
};

/** The vecN prelude of `width`, then the shared part of `source` and its section `section`, or several sections
 *  in the order given (null: the whole file). */
export function shaderSource(
  op: string,
  source: string,
  section: string | readonly string[] | null,
  width: VectorWidth,
): string {
  return PRELUDES[width] + (section === null ? source : wgslSections(op, source, section));
}

/** The shared part of `source` (everything before its first `//// <name>` line), then its section `section`, or
 *  several sections in the order given: for shaders that do not use the vecN prelude. */
export function wgslSections(op: string, source: string, section: string | readonly string[]): string {
  const parts = source.split(/^\/\/\/\/ +(\S+).*$/m);
  const bodies = (typeof section === 'string' ? [section] : section).map((name) => {
    const index = parts.findIndex((part, i) => i % 2 === 1 && part === name);
    if (index < 0) throw new Error(`${op}.wgsl has no section "//// ${name}"`);
    return parts[index + 1];
  });
  return parts[0] + bodies.join('');
}

/** `source` with workgroupSum (workgroup-sum.wgsl), the fixed-order tree sum of a workgroup of WG lanes. */
export function withWorkgroupSum(source: string): string {
  return `${workgroupSumSource}\n${source}`;
}

/** One spec per width, built once so the engine's pipeline cache (keyed by spec identity) hits. */
export function specsByWidth<S>(build: (width: VectorWidth) => S): Record<VectorWidth, S> {
  return { 1: build(1), 4: build(4) };
}

/** `source` with column-grad.wgsl: weightGradTile, the per-column weight gradient of a one-dispatch backward. */
export function withColumnGrad(source: string): string {
  return `${columnGradSource}\n${source}`;
}
