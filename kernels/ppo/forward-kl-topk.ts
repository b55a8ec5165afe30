import source from './forward-kl-topk.wgsl';
import {
  type Engine,
  type FloatDType,
  type Tensor,
  type KernelSpec,
  expectSize,
  foldWorkgroups,
  isHalf,
} from '../../engine/index.ts';
import { wgslSections } from '../util/rowwise.ts';
import { unpackPairSource } from '../util/half-weights.ts';

const UNIFORMS: KernelSpec['uniforms'] = [
  { name: 'm', type: 'u32' },
  { name: 'S', type: 'u32' },
  { name: 'R', type: 'u32' },
  { name: 'C', type: 'u32' },
  { name: 'K', type: 'u32' },
  { name: 'invTemperature', type: 'f32' },
  { name: 'minClamp', type: 'f32' },
];

/** WGSL `weightAt(i) -> f32`: element i of the bound LM-head window, a half head's (mixed precision's compute copy)
 *  unpacked from its word. */
function weightLoads(dtype: FloatDType): string {
  return isHalf(dtype)
    ? `${unpackPairSource(dtype)}fn weightAt(i: u32) -> f32 { return unpackPair(weight[i / 2u])[i & 1u]; }\n`
    : 'fn weightAt(i: u32) -> f32 { return weight[i]; }\n';
}

const logitsSpecOf = (dtype: FloatDType): KernelSpec => ({
  name: `forward-kl-topk/logits${dtype === 'f32' ? '' : `-${dtype}`}`,
  source: wgslSections('forward-kl-topk', source, 'logits') + weightLoads(dtype),
  entryPoint: 'logits',
  bindings: [
    { name: 'hidden', access: 'read' },
    { name: 'weight', access: 'read', ...(isHalf(dtype) && { type: 'u32' }) },
    { name: 'teacherIds', access: 'read', type: 'u32' },
    { name: 'mask', access: 'read' },
    { name: 'coefs', access: 'read_write' },
  ],
  uniforms: [
    ...UNIFORMS,
    { name: 'v0', type: 'u32' },
    { name: 'width', type: 'u32' },
    { name: 'h0', type: 'u32' },
    { name: 'hiddenRows', type: 'u32' },
  ],
});

/** The logits pass per LM-head dtype: float32, or the bf16/f16 compute copy mixed precision multiplies by. */
export const forwardKlTopkLogitsSpecs: Readonly<Record<FloatDType, KernelSpec>> = {
  f32: logitsSpecOf('f32'),
  bf16: logitsSpecOf('bf16'),
  f16: logitsSpecOf('f16'),
};

export const forwardKlTopkSpec: KernelSpec = {
  name: 'forward-kl-topk/kl',
  source: wgslSections('forward-kl-topk', source, 'kl'),
  entryPoint: 'kl',
  bindings: [
    { name: 'lse', access: 'read' },
    { name: 'teacherIds', access: 'read', type: 'u32' },
    { name: 'teacherLogProbs', access: 'read' },
    { name: 'mask', access: 'read' },
    { name: 'out', access: 'read_write' },
    { name: 'coefs', access: 'read_write' },
  ],
  uniforms: UNIFORMS,
};

export const forwardKlTopkPairsSpec: KernelSpec = {
  name: 'forward-kl-topk/pairs',
  source: wgslSections('forward-kl-topk', source, 'pairs'),
  entryPoint: 'pairs',
  bindings: [
    { name: 'lossGrad', access: 'read' },
    { name: 'coefs', access: 'read' },
    { name: 'teacherIds', access: 'read', type: 'u32' },
    { name: 'targets', access: 'read', type: 'u32' },
    { name: 'grads', access: 'read_write', type: 'vec2<f32>' },
    { name: 'pairIds', access: 'read_write', type: 'u32' },
    { name: 'pairCoefs', access: 'read_write' },
  ],
  uniforms: UNIFORMS,
};

export interface ForwardKlTopkShape {
  /** m sequences of S positions, R response columns (the last R of each window). */
  m: number;
  S: number;
  R: number;
  /** The student's hidden size and the teacher's top-k. */
  C: number;
  K: number;
  temperature: number;
  /** distillation_loss.log_prob_min_clamp; null: none. */
  logProbMinClamp: number | null;
}

const uniforms = (s: ForwardKlTopkShape) => ({
  m: s.m,
  S: s.S,
  R: s.R,
  C: s.C,
  K: s.K,
  invTemperature: 1 / s.temperature,
  minClamp: s.logProbMinClamp ?? -3.4e38,
});

/** Per response token: the forward KL over the teacher's top-k, the two masses (out [3, m·R]) and the coefficients
 *  of its logits gradient (coefs (m, R, K)); see forward-kl-topk.wgsl. The weight is the head the forward multiplied
 *  by (float32, or mixed precision's bf16/f16 compute copy, unpacked to float32), read one binding window at a time
 *  (engine.bindingWindows), so a head above one binding or split across buffers needs no copy; the hidden states
 *  likewise, one binding window of rows at a time (one dispatch per pair of windows: one in all where both bind). */
export function forwardKlTopkGpu(
  engine: Engine,
  t: {
    hidden: Tensor;
    weight: Tensor;
    lse: Tensor;
    teacherIds: Tensor<'u32'>;
    teacherLogProbs: Tensor;
    responseMask: Tensor;
    out: Tensor;
    coefs: Tensor;
  },
  s: ForwardKlTopkShape,
): void {
  const op = 'forward-kl-topk';
  const { m, S, R, C, K } = s;
  const dtype = t.weight.dtype;
  if (dtype === 'u32' || dtype === 'i32')
    throw new Error(`${op}: the LM head weight (tensor ${t.weight.name}) is ${dtype}; expected f32, bf16 or f16`);
  const logitsSpec = forwardKlTopkLogitsSpecs[dtype];
  expectSize(op, 'hidden', t.hidden, m * S * C, `[m·S=${m * S}, C=${C}]`);
  expectSize(op, 'lse', t.lse, m * S, `[m·S=${m * S}]`);
  for (const [tensor, what] of [
    [t.teacherIds, 'teacherIds'],
    [t.teacherLogProbs, 'teacherLogProbs'],
    [t.coefs, 'coefs'],
  ] as const)
    expectSize(op, what, tensor, m * R * K, `[m=${m}, R=${R}, K=${K}]`);
  expectSize(op, 'responseMask', t.responseMask, m * R, `[m=${m}, R=${R}]`);
  expectSize(op, 'out', t.out, 3 * m * R, `[3, m·R=${m * R}]`);
  const workgroups = foldWorkgroups(Math.ceil((m * R) / 64));
  for (const hidden of engine.bindingWindows(t.hidden, C))
    for (const weight of engine.bindingWindows(t.weight, C))
      engine.dispatch(logitsSpec, {
        bindings: {
          hidden: hidden.tensor,
          weight: weight.tensor,
          teacherIds: t.teacherIds,
          mask: t.responseMask,
          coefs: t.coefs,
        },
        uniforms: {
          ...uniforms(s),
          v0: weight.firstRow,
          width: weight.rows,
          h0: hidden.firstRow,
          hiddenRows: hidden.rows,
        },
        workgroups,
      });
  engine.dispatch(forwardKlTopkSpec, {
    bindings: {
      lse: t.lse,
      teacherIds: t.teacherIds,
      teacherLogProbs: t.teacherLogProbs,
      mask: t.responseMask,
      out: t.out,
      coefs: t.coefs,
    },
    uniforms: uniforms(s),
    workgroups,
  });
}

/** The forward KL's gradient scaled by d loss / d KL (lossGrad (m, R)): grads.x adjusted and the LM head's sparse
 *  pairs (pairIds, pairCoefs (m·S, K + 1), zero elsewhere: cleared here); see forward-kl-topk.wgsl. */
export function forwardKlTopkPairsGpu(
  engine: Engine,
  t: {
    lossGrad: Tensor;
    coefs: Tensor;
    teacherIds: Tensor<'u32'>;
    targets: Tensor<'u32'>;
    grads: Tensor;
    pairIds: Tensor<'u32'>;
    pairCoefs: Tensor;
  },
  s: ForwardKlTopkShape,
): void {
  const op = 'forward-kl-topk/pairs';
  const { m, S, R, K } = s;
  expectSize(op, 'lossGrad', t.lossGrad, m * R, `[m=${m}, R=${R}]`);
  expectSize(op, 'targets', t.targets, m * S, `[m·S=${m * S}]`);
  expectSize(op, 'grads', t.grads, 2 * m * R, `[m=${m}, R=${R}, 2]`);
  expectSize(op, 'pairIds', t.pairIds, m * S * (K + 1), `[m·S=${m * S}, K+1=${K + 1}]`);
  expectSize(op, 'pairCoefs', t.pairCoefs, m * S * (K + 1), `[m·S=${m * S}, K+1=${K + 1}]`);
  engine.clear(t.pairCoefs);
  engine.dispatch(forwardKlTopkPairsSpec, {
    bindings: {
      lossGrad: t.lossGrad,
      coefs: t.coefs,
      teacherIds: t.teacherIds,
      targets: t.targets,
      grads: t.grads,
      pairIds: t.pairIds,
      pairCoefs: t.pairCoefs,
    },
    uniforms: uniforms(s),
    workgroups: foldWorkgroups(Math.ceil((m * R) / 64)),
  });
}
