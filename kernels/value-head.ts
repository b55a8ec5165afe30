import valueHeadSource from './value-head.wgsl';
import { type Engine, type Tensor, type KernelSpec, foldWorkgroups } from '../engine/index.ts';
import { expectSize, shaderSource, specsByWidth, vectorElementType, widestVector, withWorkgroupSum } from './rowwise.ts';

// Must match TILE_COLS in value-head.wgsl: dWeight columns (in vectors) per backward workgroup.
const TILE_COLS = 16;

const forwardSpecs = specsByWidth((width): KernelSpec => ({
  name: `value-head/forward-vec${width}`,
  source: withWorkgroupSum(shaderSource('value-head', valueHeadSource, 'forward', width)),
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
}));

const backwardSpecs = specsByWidth((width): KernelSpec => ({
  name: `value-head/backward-vec${width}`,
  source: withWorkgroupSum(shaderSource('value-head', valueHeadSource, 'backward', width)),
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
}));

/** values[n] = hidden[n]·weight + bias[0]: hidden (N, C), weight = score.weight (C), bias = score.bias (1), values (N). */
export function valueHeadForward(engine: Engine, a: { hidden: Tensor; weight: Tensor; bias: Tensor; values: Tensor; N: number; C: number }): void {
  const { hidden, weight, bias, values, N, C } = a;
  expectSize('valueHeadForward', 'hidden', hidden, N * C, `[N=${N}, C=${C}]`);
  expectSize('valueHeadForward', 'weight', weight, C, `[C=${C}]`);
  expectSize('valueHeadForward', 'bias', bias, 1, '[1]');
  expectSize('valueHeadForward', 'values', values, N, `[N=${N}]`);
  engine.dispatch(forwardSpecs[widestVector(C)], {
    bindings: { hidden, weight, bias, values },
    uniforms: { rows: N, cols: C },
    workgroups: foldWorkgroups(N),
  });
}

/** Gradients of valueHeadForward: dHidden (N, C) is overwritten, dWeight (C) and dBias (1) are added to. */
export function valueHeadBackward(engine: Engine, a: {
  hidden: Tensor; weight: Tensor; dValues: Tensor; dHidden: Tensor; dWeight: Tensor; dBias: Tensor; N: number; C: number;
}): void {
  const { hidden, weight, dValues, dHidden, dWeight, dBias, N, C } = a;
  expectSize('valueHeadBackward', 'hidden', hidden, N * C, `[N=${N}, C=${C}]`);
  expectSize('valueHeadBackward', 'weight', weight, C, `[C=${C}]`);
  expectSize('valueHeadBackward', 'dValues', dValues, N, `[N=${N}]`);
  expectSize('valueHeadBackward', 'dHidden', dHidden, N * C, `[N=${N}, C=${C}]`);
  expectSize('valueHeadBackward', 'dWeight', dWeight, C, `[C=${C}]`);
  expectSize('valueHeadBackward', 'dBias', dBias, 1, '[1]');
  const width = widestVector(C);
  const tiles = Math.ceil(C / width / TILE_COLS);
  engine.dispatch(backwardSpecs[width], {
    bindings: { hidden, weight, dValues, dHidden, dWeight, dBias },
    uniforms: { rows: N, cols: C },
    workgroups: foldWorkgroups(tiles + N),
  });
}
