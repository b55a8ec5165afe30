import transposeSource from './transpose.wgsl';
import { type Engine, type Tensor, type KernelSpec, foldWorkgroups, expectSize } from '../../engine/index.ts';
import type { Variant } from '../../engine/variants.ts';
import { shaderSource, specsByWidth, vectorElementType, widestVector } from './rowwise.ts';

const specs = specsByWidth((width): KernelSpec => {
  const entryPoint = width === 4 ? 'block4' : 'element';
  return {
    name: `transpose/${entryPoint}`,
    source: shaderSource('transpose', transposeSource, entryPoint, width),
    entryPoint,
    bindings: [
      { name: 'x', access: 'read', type: vectorElementType(width) },
      { name: 'out', access: 'read_write', type: vectorElementType(width) },
    ],
    uniforms: [
      { name: 'rows', type: 'u32' },
      { name: 'cols', type: 'u32' },
    ],
  };
});

/** out (cols, rows) = x (rows, cols)ᵀ. `out` must not overlap `x`. */
export function transpose(engine: Engine, a: { x: Tensor; out: Tensor; rows: number; cols: number }): void {
  const { x, out, rows, cols } = a;
  expectSize('transpose', 'x', x, rows * cols, `[rows=${rows}, cols=${cols}]`);
  expectSize('transpose', 'out', out, rows * cols, `[cols=${cols}, rows=${rows}]`);
  const width = widestVector(rows, cols);
  engine.dispatch(specs[width], {
    bindings: { x, out },
    uniforms: { rows, cols },
    workgroups: foldWorkgroups(Math.ceil((rows * cols) / (width * width) / 64)),
  });
}

// Whether a training forward ('transposed-weights') or a decode step ('decode-weights',
// models/incremental-decoder.ts) multiplies by transposed copies of the layer weights (nn) rather than the
// weights as stored (nt). On a CPU the register kernel's nn path beats the nt kernels by 1.5-2x at a training step's
// shapes (1024 rows), and the transposes cost one pass over the weights per forward; a GPU's tiled nt kernel
// reads B through workgroup memory either way, so it keeps the weights as they are and saves the copies' memory.
export const transposedWeightVariants: readonly Variant<boolean>[] = [
  { name: 'transposed', supported: (caps) => caps.deviceClass === 'cpu', value: true },
  { name: 'as-stored', supported: () => true, value: false },
];
