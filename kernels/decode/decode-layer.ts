import decodeLayerSource from './decode-layer.wgsl';
import ropeAngleSource from '../layers/rope-angle.wgsl';
import {
  type Engine,
  type Tensor,
  type KernelSpec,
  type DeviceCapabilities,
  chooseVariant,
  expectSize,
} from '../../engine/index.ts';
import type { Variant } from '../../engine/variants.ts';
import { shaderSource } from '../util/rowwise.ts';
import { inverseFrequencyTable } from '../layers/rope.ts';
import { expectDecodeCache } from './decode-attention.ts';

/** Sequences per workgroup (the shader's ROWS): each workgroup streams every weight of the layer once. */
const ROWS = 4;
/** The largest head the shader takes: one vec4 of each head vector per lane of its 8. */
const MAX_HS = 32;
/** Bindings of the shader: lavapipe allows 16, the WebGPU default is 8 (GPUs run the separate kernels anyway). */
const BINDINGS = 16;

export interface DecodeLayerShape {
  C: number;
  NH: number;
  NKV: number;
  HS: number;
  I: number;
}

/** A whole layer per dispatch (CPU devices with 8-lane subgroups), or the separate kernels of the decoder's
 *  schedule: on a GPU one workgroup per 4 sequences would leave the device idle. */
export const decodeLayerVariants: readonly Variant<boolean>[] = [
  {
    name: 'fused',
    supported: (caps) =>
      caps.deviceClass === 'cpu' &&
      caps.subgroups &&
      caps.subgroupMinSize >= 8 &&
      caps.maxStorageBuffersPerShaderStage >= BINDINGS,
    value: true,
  },
  { name: 'separate', supported: () => true, value: false },
];

/** vec4s of workgroup memory a layer of this shape needs: ROWS rows of x, normed x, qkv (or the swiglu
 *  activations, whichever is wider) and the attention output. */
function workgroupVec4s(s: DecodeLayerShape): number {
  const W = (s.NH + 2 * s.NKV) * s.HS;
  return (ROWS * (2 * s.C + Math.max(W, s.I) + s.NH * s.HS)) / 4;
}

/** Whether decodeLayer runs this shape on this device, and is the variant chosen for it. */
export function useDecodeLayer(engine: Engine, s: DecodeLayerShape): boolean {
  const fits =
    s.C % 4 === 0 &&
    s.I % 4 === 0 &&
    s.HS % 8 === 0 &&
    s.HS <= MAX_HS &&
    s.NH % s.NKV === 0 &&
    workgroupVec4s(s) * 16 <= engine.caps.maxComputeWorkgroupStorageSize;
  return fits && chooseVariant('decode-layer', decodeLayerVariants, engine.caps, engine.knobs).value;
}

const specs = new Map<string, KernelSpec>();

function specFor(caps: DeviceCapabilities): KernelSpec {
  // One array size per device (its whole workgroup memory) keeps it to one pipeline.
  const mem4 = Math.floor(caps.maxComputeWorkgroupStorageSize / 16);
  const key = `${mem4}`;
  let spec = specs.get(key);
  if (!spec) {
    const [shared, template, rest] = decodeLayerSource.split(/^\/\/\/\/ .*$/m);
    const projections = ['qkvW', 'oW', 'gateUpW', 'downW']
      .map((name) => `const PAIRED_${name} = ${name === 'gateUpW'};\n${template.replaceAll('WEIGHT', name)}`)
      .join('\n');
    spec = {
      name: 'decode-layer/fused',
      source: shaderSource(
        'decode-layer',
        `const MEM4: u32 = ${mem4}u;\n${ropeAngleSource}\n${shared}${projections}${rest}`,
        null,
        4,
      ),
      features: ['subgroups'],
      bindings: [
        { name: 'x', access: 'read_write', type: 'vec4<f32>' },
        { name: 'inNorm', access: 'read', type: 'vec4<f32>' },
        { name: 'postNorm', access: 'read', type: 'vec4<f32>' },
        { name: 'qkvW', access: 'read', type: 'vec4<f32>' },
        { name: 'qkvBias', access: 'read', type: 'vec4<f32>' },
        { name: 'qNorm', access: 'read', type: 'vec4<f32>' },
        { name: 'kNorm', access: 'read', type: 'vec4<f32>' },
        { name: 'oW', access: 'read', type: 'vec4<f32>' },
        { name: 'oBias', access: 'read', type: 'vec4<f32>' },
        { name: 'gateUpW', access: 'read', type: 'vec4<f32>' },
        { name: 'downW', access: 'read', type: 'vec4<f32>' },
        { name: 'positions', access: 'read', type: 'i32' },
        { name: 'invFreq', access: 'read', type: 'vec4<f32>' },
        { name: 'kCache', access: 'read_write', type: 'vec4<f32>' },
        { name: 'vCache', access: 'read_write', type: 'vec4<f32>' },
        { name: 'keyMask', access: 'read', type: 'u32' },
      ],
      uniforms: [
        { name: 'B', type: 'u32' },
        { name: 'C', type: 'u32' },
        { name: 'NH', type: 'u32' },
        { name: 'NKV', type: 'u32' },
        { name: 'HS', type: 'u32' },
        { name: 'I', type: 'u32' },
        { name: 'capacity', type: 'u32' },
        { name: 'slot', type: 'u32' },
        { name: 'maskBatchStride', type: 'u32' },
        { name: 'eps', type: 'f32' },
        { name: 'scale', type: 'f32' },
        { name: 'qkNorm', type: 'u32' },
        { name: 'qkvBias', type: 'u32' },
        { name: 'oBias', type: 'u32' },
      ],
    };
    specs.set(key, spec);
  }
  return spec;
}

export interface DecodeLayerArgs extends DecodeLayerShape {
  /** (B, C) the residual stream of each sequence's new token; the layer's output replaces it. */
  x: Tensor;
  /**
   * Transposed float32 weights: qkv (C, (NH + 2·NKV)·HS), o (NH·HS, C), gateUp (C, 2I) gate columns first, down (I, C).
   */
  qkvT: Tensor;
  oT: Tensor;
  gateUpT: Tensor;
  downT: Tensor;
  /** (C) each. */
  inputNorm: Tensor;
  postNorm: Tensor;
  /** Qwen3's q_norm and k_norm weights (HS) each. */
  qkNorm?: { q: Tensor; k: Tensor };
  /** ((NH + 2·NKV)·HS) and (C). */
  qkvBias?: Tensor;
  oBias?: Tensor;
  /** (B) position of each new token, and RoPE's theta. */
  positions: Tensor<'i32'>;
  theta: number;
  /** (≥ B, capacity, NKV·HS) each; slot `slot` is overwritten with the new k, v. */
  kCache: Tensor;
  vCache: Tensor;
  /** (≥ B, maskBatchStride) u32. */
  keyMask: Tensor<'u32'>;
  B: number;
  capacity: number;
  slot: number;
  maskBatchStride: number;
  eps: number;
  /** Attention's score scale, 1/√HS. */
  scale: number;
}

/** One decoder layer of a decode step: x += attention block, the new k, v cached at `slot`; x += MLP block. */
export function decodeLayer(engine: Engine, a: DecodeLayerArgs): void {
  const { x, B, C, NH, NKV, HS, I, capacity, slot, maskBatchStride } = a;
  const launcher = 'decodeLayer';
  if (!useDecodeLayer(engine, a))
    throw new Error(
      `${launcher}: C=${C}, NH=${NH}, NKV=${NKV}, HS=${HS}, I=${I} is not a shape the fused layer takes on ` +
        `${engine.caps.description}`,
    );
  expectDecodeCache(launcher, a);
  // A half-precision cache comes with half-precision rollout weights, which this float32 layer does not read.
  if (a.kCache.dtype !== 'f32')
    throw new Error(`${launcher}: kCache ${a.kCache.name} is ${a.kCache.dtype}; the fused layer reads a float32 cache`);
  const W = (NH + 2 * NKV) * HS;
  expectSize(launcher, 'x', x, B * C, `[B=${B}, C=${C}]`);
  expectSize(launcher, 'qkvT', a.qkvT, C * W, `[C=${C}, W=${W}]`);
  expectSize(launcher, 'oT', a.oT, NH * HS * C, `[NH·HS=${NH * HS}, C=${C}]`);
  expectSize(launcher, 'gateUpT', a.gateUpT, C * 2 * I, `[C=${C}, 2I=${2 * I}]`);
  expectSize(launcher, 'downT', a.downT, I * C, `[I=${I}, C=${C}]`);
  expectSize(launcher, 'inputNorm', a.inputNorm, C, `[C=${C}]`);
  expectSize(launcher, 'postNorm', a.postNorm, C, `[C=${C}]`);
  expectSize(launcher, 'positions', a.positions, B, `[B=${B}]`);
  if (a.qkNorm) {
    expectSize(launcher, 'qkNorm.q', a.qkNorm.q, HS, `[HS=${HS}]`);
    expectSize(launcher, 'qkNorm.k', a.qkNorm.k, HS, `[HS=${HS}]`);
  }
  if (a.qkvBias) expectSize(launcher, 'qkvBias', a.qkvBias, W, `[W=${W}]`);
  if (a.oBias) expectSize(launcher, 'oBias', a.oBias, C, `[C=${C}]`);
  // Absent optional tensors bind a tensor of the layer that the shader then never reads.
  engine.dispatch(specFor(engine.caps), {
    bindings: {
      x,
      inNorm: a.inputNorm,
      postNorm: a.postNorm,
      qkvW: a.qkvT,
      qkvBias: a.qkvBias ?? a.inputNorm,
      qNorm: a.qkNorm?.q ?? a.inputNorm,
      kNorm: a.qkNorm?.k ?? a.inputNorm,
      oW: a.oT,
      oBias: a.oBias ?? a.inputNorm,
      gateUpW: a.gateUpT,
      downW: a.downT,
      positions: a.positions,
      invFreq: inverseFrequencyTable(engine, HS, a.theta),
      kCache: a.kCache,
      vCache: a.vCache,
      keyMask: a.keyMask,
    },
    uniforms: {
      B,
      C,
      NH,
      NKV,
      HS,
      I,
      capacity,
      slot,
      maskBatchStride,
      eps: a.eps,
      scale: a.scale,
      qkNorm: Number(a.qkNorm !== undefined),
      qkvBias: Number(a.qkvBias !== undefined),
      oBias: Number(a.oBias !== undefined),
    },
    workgroups: [Math.ceil(B / ROWS)],
  });
}
