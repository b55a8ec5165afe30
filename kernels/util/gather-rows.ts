import source from './gather-rows.wgsl';
import { type Engine, type Tensor, type KernelSpec, expectSize, foldWorkgroups } from '../../engine/index.ts';

const spec: KernelSpec = {
  name: 'gather-rows',
  source,
  bindings: [
    { name: 'source', access: 'read' },
    { name: 'rows', access: 'read', type: 'u32' },
    { name: 'out', access: 'read_write' },
  ],
  uniforms: [
    { name: 'm', type: 'u32' },
    { name: 'width', type: 'u32' },
    { name: 'sourceStride', type: 'u32' },
  ],
};

/** out (m, width) = the first `width` columns of rows `rows` (m indices) of `source` (N, sourceStride), in one
 *  dispatch; `rows` holds row indices below N, which the caller checked when it uploaded them. */
export function gatherRows(
  engine: Engine,
  a: { source: Tensor; sourceStride: number; rows: Tensor<'u32'>; m: number; width: number; out: Tensor },
): void {
  const { source, sourceStride, rows, m, width, out } = a;
  if (width > sourceStride)
    throw new Error(`gatherRows: width ${width} exceeds the source's ${sourceStride} columns (tensor ${source.name})`);
  if (source.size % sourceStride !== 0)
    throw new Error(
      `gatherRows: source (tensor ${source.name}) has ${source.size} elements, not whole rows of ${sourceStride}`,
    );
  expectSize('gatherRows', 'rows', rows, m, `[m=${m}]`, 'at least');
  expectSize('gatherRows', 'out', out, m * width, `[m=${m}, width=${width}]`, 'at least');
  if (m * width === 0) return;
  engine.dispatch(spec, {
    bindings: { source, rows, out },
    uniforms: { m, width, sourceStride },
    workgroups: foldWorkgroups(Math.ceil((m * width) / 256)),
  });
}
