// KL controllers, the seeded RNG, the reward mask draw, the critic plan and the GSM8K rule reward.
import { describe, it, expect } from 'vitest';
import {
  AdaptiveKLController,
  FixedKLController,
  getKlController,
  type KLController,
} from '../../ppo/algorithm/kl-controller.ts';
import { Rng } from '../../engine/rng.ts';
import { sampleRewardMask } from '../../ppo/algorithm/reward-mask.ts';
import { criticMetrics, planCritic } from '../../ppo/algorithm/critic-plan.ts';
import { computeScore, extractSolution } from '../../ppo/rewards/gsm8k.ts';
import { parseKlEstimator } from '../../kernels/ppo/ppo-vocabulary.ts';

describe('KL controllers', () => {
  it('adaptive: β ·= 1 + clip(kl/target − 1, ±0.2)·n/horizon', () => {
    const ctrl = new AdaptiveKLController(0.05, 0.1, 100);
    ctrl.update(0.3, 10);
    expect(ctrl.value).toBeCloseTo(0.05 * (1 + 0.2 * 0.1), 15);
    ctrl.update(0.09, 10);
    expect(ctrl.value).toBeCloseTo(0.05 * 1.02 * (1 - 0.1 * 0.1), 15);
  });

  it('fixed keeps β; the factory checks its config', () => {
    const ctrl: KLController = new FixedKLController(0.001);
    ctrl.update(5, 100);
    expect(ctrl.value).toBe(0.001);
    expect(() => getKlController({ type: 'adaptive', kl_coef: 0.1, target_kl: 0.1, horizon: 0 })).toThrow(/horizon/);
    expect(() => getKlController({ type: 'pid', kl_coef: 0.1 })).toThrow(/fixed or adaptive/);
  });

  it('unsupported KL estimators are clear errors', () => {
    expect(() => parseKlEstimator('full')).toThrow(/not implemented/);
    expect(() => parseKlEstimator('k4')).toThrow(/unsupported estimator "k4"/);
    expect(parseKlEstimator('k3+')).toEqual({ code: 3, straightThrough: true });
  });
});

describe('seeded RNG', () => {
  it('resumes bit-identically from a saved state', () => {
    const a = new Rng(42);
    for (let i = 0; i < 10; i++) a.next();
    const b = Rng.fromState(a.state());
    const fromA = Array.from({ length: 20 }, () => a.nextUint32());
    const fromB = Array.from({ length: 20 }, () => b.nextUint32());
    expect(fromB).toEqual(fromA);
    expect(new Rng(42).next()).not.toBe(new Rng(43).next());
    expect(() => Rng.fromState([0, 0, 0, 0])).toThrow(/not all zero/);
  });
});

describe('reward mask', () => {
  it('draws one Bernoulli per trajectory and reports the realised ratio', () => {
    const mask = sampleRewardMask(new Rng(7), 4000, 0.25);
    const masked = mask.keep.filter((k) => k === 0).length;
    expect(mask.metrics['reward_mask/ratio_actual']).toBe(masked / 4000);
    expect(Math.abs(masked / 4000 - 0.25)).toBeLessThan(0.03);
    expect(sampleRewardMask(new Rng(7), 4000, 0.25).keep).toEqual(mask.keep);
  });

  it('ratio 0 masks nothing and leaves the stream untouched', () => {
    const rng = new Rng(9);
    const before = rng.state();
    expect(sampleRewardMask(rng, 16, 0).keep.every((k) => k === 1)).toBe(true);
    expect(rng.state()).toEqual(before);
    expect(() => sampleRewardMask(rng, 4, 1.5)).toThrow(/reward_mask_ratio/);
  });
});

describe('freeze critic', () => {
  it('computes values for GAE but allocates no optimizer state, runs no update and reports no vf_loss', () => {
    const frozen = planCritic({ advEstimator: 'gae', freeze: true });
    expect(frozen).toEqual({ computeValues: true, allocateOptimizerState: false, update: false });
    expect(criticMetrics(frozen, null)).toEqual({ 'critic/frozen': 1 });
    expect(() => criticMetrics(frozen, { 'critic/vf_loss': 1, 'critic/vf_clipfrac': 0 })).toThrow(/frozen/);
    const training = planCritic({ advEstimator: 'gae', freeze: false });
    expect(training).toEqual({ computeValues: true, allocateOptimizerState: true, update: true });
    expect(criticMetrics(training, { 'critic/vf_loss': 0.5, 'critic/vf_clipfrac': 0.1 })).toEqual({
      'critic/vf_loss': 0.5,
      'critic/vf_clipfrac': 0.1,
    });
    expect(planCritic({ advEstimator: 'grpo', freeze: false }).computeValues).toBe(false);
  });
});

describe('gsm8k rule reward', () => {
  it('strict and flexible extraction as verl', () => {
    expect(extractSolution('a #### 70\nb #### 1,234')).toBe('1234');
    expect(extractSolution('#### $5')).toBeNull();
    expect(extractSolution('#### $5', 'flexible')).toBe('5');
    expect(extractSolution('We get 3. Then 5.', 'flexible')).toBe('5.');
    expect(computeScore(`#### 72 ${'x'.repeat(400)}`, '72')).toBe(0);
    expect(computeScore('#### 7', '72', 'strict', 0.1)).toBe(0.1);
  });
});
