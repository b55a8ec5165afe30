// Kernels are declared as data: a WGSL body plus its bindings and uniform fields. The engine generates the
// declarations (uniform struct at binding 0, storage arrays after it in declaration order) so a shader and its
// launcher cannot disagree about layout.

export type ScalarType = 'u32' | 'i32' | 'f32';
export type ElementType = ScalarType | 'f16' | 'vec4<f32>' | 'vec2<f32>' | 'vec2<u32>' | 'vec4<f16>';

export interface BindingSpec {
  readonly name: string;
  readonly access: 'read' | 'read_write';
  /** Element type of the storage array; f32 when omitted. */
  readonly type?: ElementType;
}

export interface UniformSpec {
  readonly name: string;
  readonly type: ScalarType;
}

export interface KernelSpec {
  /** Unique name, `<op>` or `<op>/<variant>`; the profiler reports by this name. */
  readonly name: string;
  /** WGSL without the generated declarations; refers to `params.<uniform>` and the binding names. */
  readonly source: string;
  readonly bindings: readonly BindingSpec[];
  readonly uniforms: readonly UniformSpec[];
  readonly entryPoint?: string;
  /** Values for WGSL `override` constants. */
  readonly constants?: Readonly<Record<string, number>>;
  /** Optional device features the source needs (it gets the matching `enable`). */
  readonly features?: readonly ('shader-f16' | 'subgroups')[];
}

export function uniformByteSize(spec: KernelSpec): number {
  return Math.max(16, Math.ceil((spec.uniforms.length * 4) / 16) * 16);
}

export function generateDeclarations(spec: KernelSpec): string {
  const lines: string[] = [];
  if (spec.features?.includes('shader-f16')) lines.push('enable f16;');
  if (spec.features?.includes('subgroups')) lines.push('enable subgroups;');
  const fields = spec.uniforms.length > 0 ? spec.uniforms.map((u) => `  ${u.name}: ${u.type},`) : ['  unused: u32,'];
  lines.push('struct Params {', ...fields, '}');
  lines.push('@group(0) @binding(0) var<uniform> params: Params;');
  spec.bindings.forEach((b, i) => {
    const access = b.access === 'read' ? 'read' : 'read_write';
    lines.push(`@group(0) @binding(${i + 1}) var<storage, ${access}> ${b.name}: array<${b.type ?? 'f32'}>;`);
  });
  return `${lines.join('\n')}\n`;
}

export function packUniforms(
  spec: KernelSpec,
  values: Readonly<Record<string, number>>,
  target: DataView,
  byteOffset: number,
): void {
  spec.uniforms.forEach((u, i) => {
    const value = values[u.name];
    if (value === undefined || Number.isNaN(value)) {
      throw new Error(`kernel ${spec.name}: uniform ${u.name} is ${value}`);
    }
    const at = byteOffset + i * 4;
    if (u.type === 'f32') target.setFloat32(at, value, true);
    else if (u.type === 'u32') {
      if (!Number.isInteger(value) || value < 0 || value > 0xffffffff)
        throw new Error(`kernel ${spec.name}: uniform ${u.name}=${value} is not a u32`);
      target.setUint32(at, value, true);
    } else {
      if (!Number.isInteger(value)) throw new Error(`kernel ${spec.name}: uniform ${u.name}=${value} is not an i32`);
      target.setInt32(at, value, true);
    }
  });
}

/** Workgroup counts for `count` workgroups along one logical axis, folded into y past the per-dimension limit.
 *  Shaders recover the linear index as `wid.x + wid.y * nwg.x` (and must skip indices >= their count). */
export function foldWorkgroups(count: number, maxPerDimension = 65535): [number, number, number] {
  if (count <= maxPerDimension) return [Math.max(1, count), 1, 1];
  return [maxPerDimension, Math.ceil(count / maxPerDimension), 1];
}
