// On-policy distillation's losses (verl 1dda039b, trainer/distillation/losses.py and fsdp/losses.py) as float64
// references: forward_kl_topk's value against the full KL where the top-k is the whole vocabulary, its logits
// gradient and the combination's gradient against central differences, and verl's config checks in its words.
import { describe, it, expect } from 'vitest';
import { numericGradientError } from '../support/numeric-gradient.ts';
import {
  combineDistillationRef,
  estimatorDistillationRef,
  forwardKlTopkRef,
  totalDistillationLoss,
} from '../../kernels/ppo/distillation-loss.ref.ts';
import { localAggregation } from '../../kernels/ppo/agg-loss.ref.ts';
import {
  checkDistillationLoss,
  DISTILLATION_LOSS_DEFAULTS,
  DISTILLATION_LOSS_MODES,
} from '../../ppo/algorithm/distillation.ts';

const V = 7;
const logits = Float64Array.from({ length: V }, (_, j) => Math.sin(1.3 * j + 0.4) * 2);
const logSoftmax = (z: ArrayLike<number>) => {
  const max = Math.max(...Array.from(z));
  const lse = max + Math.log(Array.from(z).reduce((a, v) => a + Math.exp(v - max), 0));
  return Array.from(z, (v) => v - lse);
};
const teacherFull = logSoftmax(Array.from({ length: V }, (_, j) => Math.cos(0.7 * j) * 1.5));

describe('forward_kl_topk (verl compute_forward_kl_topk)', () => {
  it('is the full forward KL(teacher ‖ student) when the top-k is the whole vocabulary and nothing clamps', () => {
    const ids = Array.from({ length: V }, (_, j) => j);
    const r = forwardKlTopkRef(logits, teacherFull, ids, null);
    const student = logSoftmax(logits);
    const kl = teacherFull.reduce((a, t, j) => a + Math.exp(t) * (t - student[j]), 0);
    expect(r.loss).toBeCloseTo(kl, 12);
    expect(r.teacherMass).toBeCloseTo(1, 12);
    expect(r.studentMass).toBeCloseTo(1, 12);
    expect(r.overlapCount).toBe(V);
  });

  it('has the logits gradient of its value, the clamped student log-probs passing none', () => {
    // Top 3 of the teacher, one of them where the student's log-prob is below a clamp of −2.5.
    const ids = [0, 3, 5];
    const teacher = ids.map((j) => teacherFull[j]);
    const student = logSoftmax(logits);
    const floor = -2.5;
    expect(ids.some((j) => student[j] < floor)).toBe(true);
    expect(ids.some((j) => student[j] >= floor)).toBe(true);
    const probe = Float64Array.from(logits);
    const r = forwardKlTopkRef(probe, teacher, ids, floor);
    expect(r.loss).toBeGreaterThan(0);
    expect(
      numericGradientError(probe, () => forwardKlTopkRef(probe, teacher, ids, floor).loss, r.gradLogits, {
        floor: 1e-3,
      }),
    ).toBeLessThan(1e-6);
  });

  it('is clamped at 0 with no gradient when the top-k masses make it negative', () => {
    // The student puts more mass on the teacher's ids than the teacher does.
    const ids = [0, 1];
    const student = logSoftmax(logits);
    const r = forwardKlTopkRef(logits, [student[0] - 1, student[1] - 1], ids, null);
    expect(r.loss).toBe(0);
    expect(Array.from(r.gradLogits).every((g) => g === 0)).toBe(true);
  });
});

describe('the distillation loss combined (verl distillation_loss, distillation_ppo_loss)', () => {
  const B = 2;
  const T = 4;
  const mask = [1, 1, 1, 0, 1, 1, 0, 0];
  const teacher = Float64Array.from({ length: B * T }, (_, i) => -1 + 0.4 * Math.sin(i));
  const old = Float64Array.from({ length: B * T }, (_, i) => -1 + 0.3 * Math.cos(1.7 * i));
  const aggregation = localAggregation('token-mean', mask, B, T);

  it('without policy gradient: agg_loss of the clamped estimator losses, with their gradient', () => {
    const lp = Float64Array.from(old, (v, i) => v + 0.05 * Math.sin(3 * i));
    const run = (x: Float64Array) => {
      const { losses, grad } = estimatorDistillationRef(x, teacher, 'k3');
      return combineDistillationRef({
        losses,
        lossGrad: grad,
        logProb: x,
        oldLogProb: old,
        responseMask: mask,
        aggregation,
        usePolicyGradient: false,
        lossMaxClamp: 10,
        clipRatioLow: 0.2,
        clipRatioHigh: 0.2,
        B,
        T,
      });
    };
    const r = run(lp);
    expect(r.loss).toBeGreaterThan(0);
    expect(numericGradientError(lp, () => run(lp).loss, r.gradLogProb, { floor: 1e-3 })).toBeLessThan(1e-6);
  });

  it('with policy gradient: vanilla PPO on advantages −loss, so a token the teacher prefers is pushed up', () => {
    const { losses, grad } = estimatorDistillationRef(old, teacher, 'k1');
    const r = combineDistillationRef({
      losses,
      lossGrad: grad,
      logProb: old,
      oldLogProb: old,
      responseMask: mask,
      aggregation,
      usePolicyGradient: true,
      lossMaxClamp: 10,
      clipRatioLow: 0.2,
      clipRatioHigh: 0.2,
      B,
      T,
    });
    // On-policy (ratio 1): d loss / d log π_t = −A_t / tokens = (student − teacher) / tokens for k1.
    mask.forEach((m, i) => expect(r.gradLogProb[i]).toBeCloseTo((m * (old[i] - teacher[i])) / 5, 12));
    expect(totalDistillationLoss(2, r.loss, { useTaskRewards: true, distillationLossCoef: 0.5 })).toBeCloseTo(
      2 + 0.5 * r.loss,
      12,
    );
    expect(totalDistillationLoss(2, r.loss, { useTaskRewards: false, distillationLossCoef: 0.5 })).toBe(r.loss);
  });

  it("verl's checks, in its words", () => {
    expect(DISTILLATION_LOSS_MODES).toEqual(['kl', 'k1', 'abs', 'mse', 'k2', 'low_var_kl', 'k3', 'forward_kl_topk']);
    expect(() => checkDistillationLoss(DISTILLATION_LOSS_DEFAULTS)).not.toThrow();
    expect(() =>
      checkDistillationLoss({ ...DISTILLATION_LOSS_DEFAULTS, loss_mode: 'k1', use_policy_gradient: false }),
    ).toThrow('Directly backpropagating k1 loss is incorrect');
    expect(() => checkDistillationLoss({ ...DISTILLATION_LOSS_DEFAULTS, policy_loss_mode: 'gspo' })).toThrow(
      'Only vanilla policy loss is currently supported',
    );
    expect(() => checkDistillationLoss({ ...DISTILLATION_LOSS_DEFAULTS, loss_mode: 'js' })).toThrow(
      'Unsupported loss mode: js',
    );
  });
});
