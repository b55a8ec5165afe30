import valueHeadSource from './value-head.wgsl';
import {
  type Engine,
  type Tensor,
  type KernelSpec,
  chooseVariant,
  foldWorkgroups,
  expectSize,
} from '../../engine/index.ts';
import type { Variant } from '../../engine/variants.ts';
import {
  shaderSource,
  specsByWidth,
  vectorElementType,
  widestVector,
  withColumnGrad,
  withWorkgroupSum,
  type VectorWidth,
} from '../util/rowwise.ts';

// Must match WG in value-head.wgsl and TILE_COLS in ../util/column-grad.wgsl: lanes per workgroup, dWeight columns
// (in vectors) per backward workgroup.
const WG = 64;
const TILE_COLS = 16;

type RowVariant = 'workgroup-per-row' | 'lane-per-row';

interface ValueHeadKernels {
  forward: Record<VectorWidth, KernelSpec>;
  backward: Record<VectorWidth, KernelSpec>;
  /** Rows each forward workgroup (and each dHidden workgroup of the backward) covers. */
  rowsPerWorkgroup: number;
}

const forwardSpecs = (variant: RowVariant) =>
  specsByWidth(
    (width): KernelSpec => ({
      name: `value-head/forward-${variant}-vec${width}`,
      source: withWorkgroupSum(shaderSource('value-head', valueHeadSource, `forward-${variant}`, width)),
      entryPoint: 'forward',
      bindings: [
        { name: 'hidden', access: 'read', type: vectorElementType(width) },
        { name: 'weight', access: 'read', type: vectorElementType(width) },
        { name: 'bias', access: 'read' },
        { name: 'values', access: 'read_write' },
      ],
      uniforms: [
        { name: 'rows', type: 'u32' },
        { name: 'cols', type: 'u32' },
      ],
    }),
  );

const backwardSpecs = (variant: RowVariant) =>
  specsByWidth(
    (width): KernelSpec => ({
      name: `value-head/backward-${variant}-vec${width}`,
      source: withWorkgroupSum(
        withColumnGrad(shaderSource('value-head', valueHeadSource, ['backward', `backward-${variant}`], width)),
      ),
      entryPoint: 'backward',
      bindings: [
        { name: 'hidden', access: 'read', type: vectorElementType(width) },
        { name: 'weight', access: 'read', type: vectorElementType(width) },
        { name: 'dValues', access: 'read' },
        { name: 'dHidden', access: 'read_write', type: vectorElementType(width) },
        { name: 'dWeight', access: 'read_write', type: vectorElementType(width) },
        { name: 'dBias', access: 'read_write' },
      ],
      uniforms: [
        { name: 'rows', type: 'u32' },
        { name: 'cols', type: 'u32' },
      ],
    }),
  );

const kernels = (variant: RowVariant): ValueHeadKernels => ({
  forward: forwardSpecs(variant),
  backward: backwardSpecs(variant),
  rowsPerWorkgroup: variant === 'lane-per-row' ? WG : 1,
});

// On lavapipe a workgroup per row pays a workgroup's fixed cost and a tree sum's barriers for each row's C/4
// loads: one lane per row is ~10x faster there (the forward ran at 0.07x its CPU reference as a workgroup per row).
export const valueHeadVariants: readonly Variant<ValueHeadKernels>[] = [
  { name: 'lane-per-row', supported: (caps) => caps.deviceClass === 'cpu', value: kernels('lane-per-row') },
  { name: 'workgroup-per-row', supported: () => true, value: kernels('workgroup-per-row') },
];

function chosen(engine: Engine): ValueHeadKernels {
  return chooseVariant('value-head', valueHeadVariants, engine.caps, engine.knobs).value;
}

/**
 * values[n] = hidden[n]·weight + bias[0]: hidden (N, C), weight = score.weight (C), bias = score.bias (1), values (N).
 */
export function valueHeadForward(
  engine: Engine,
  a: { hidden: Tensor; weight: Tensor; bias: Tensor; values: Tensor; N: number; C: number },
): void {
  const { hidden, weight, bias, values, N, C } = a;
  expectSize('valueHeadForward', 'hidden', hidden, N * C, `[N=${N}, C=${C}]`);
  expectSize('valueHeadForward', 'weight', weight, C, `[C=${C}]`);
  expectSize('valueHeadForward', 'bias', bias, 1, '[1]');
  expectSize('valueHeadForward', 'values', values, N, `[N=${N}]`);
  const variant = chosen(engine);
  engine.dispatch(variant.forward[widestVector(C)], {
    bindings: { hidden, weight, bias, values },
    uniforms: { rows: N, cols: C },
    workgroups: foldWorkgroups(Math.ceil(N / variant.rowsPerWorkgroup)),
  });
}

/** Gradients of valueHeadForward: dHidden (N, C) is overwritten, dWeight (C) and dBias (1) are added to. */
export function valueHeadBackward(
  engine: Engine,
  a: {
    hidden: Tensor;
    weight: Tensor;
    dValues: Tensor;
    dHidden: Tensor;
    dWeight: Tensor;
    dBias: Tensor;
    N: number;
    C: number;
  },
): void {
  const { hidden, weight, dValues, dHidden, dWeight, dBias, N, C } = a;
  expectSize('valueHeadBackward', 'hidden', hidden, N * C, `[N=${N}, C=${C}]`);
  expectSize('valueHeadBackward', 'weight', weight, C, `[C=${C}]`);
  expectSize('valueHeadBackward', 'dValues', dValues, N, `[N=${N}]`);
  expectSize('valueHeadBackward', 'dHidden', dHidden, N * C, `[N=${N}, C=${C}]`);
  expectSize('valueHeadBackward', 'dWeight', dWeight, C, `[C=${C}]`);
  expectSize('valueHeadBackward', 'dBias', dBias, 1, '[1]');
  const variant = chosen(engine);
  const width = widestVector(C);
  const tiles = Math.ceil(C / width / TILE_COLS);
  engine.dispatch(variant.backward[width], {
    bindings: { hidden, weight, dValues, dHidden, dWeight, dBias },
    uniforms: { rows: N, cols: C },
    workgroups: foldWorkgroups(tiles + Math.ceil(N / variant.rowsPerWorkgroup)),
  });
}
