// The distillation loss kernel (kernels/ppo/distillation-loss) against its float64 reference
// (kernels/ppo/distillation-loss.ref.ts, verl 1dda039b's distillation_loss ported), whose gradients
// test/cpu/distillation-loss.test.ts checks by central differences: every estimator mode on both paths (the loss
// back-propagated, and vanilla PPO on −loss as the advantage), with and without the clamps, rollout_is weights,
// every aggregation, added to the actor loss's gradients or written alone; and its metric partials.
import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { expectClose, seededRandom } from '../support/arrays.ts';
import type { Engine } from '../../engine/index.ts';
import { computeDistillationLossGpu, distillationPartialTotals } from '../../kernels/ppo/distillation-loss.ts';
import { combineDistillationRef, estimatorDistillationRef } from '../../kernels/ppo/distillation-loss.ref.ts';
import { localAggregation } from '../../kernels/ppo/agg-loss.ref.ts';
import { LOSS_AGG_MODES } from '../../kernels/ppo/ppo-vocabulary.ts';

const B = 5;
const T = 70;
// Rows longer than a workgroup, an interior gap (multi-turn observation), an empty row, a one-token row.
const MASK = (() => {
  const m = new Float32Array(B * T);
  [70, 55, 0, 1, 40].forEach((n, b) => {
    for (let t = 0; t < n; t++) m[b * T + t] = 1;
  });
  for (let t = 10; t < 25; t++) m[T + t] = 0;
  return m;
})();

function random(seed: number, scale: number, offset: number): Float32Array {
  const r = seededRandom(seed);
  return Float32Array.from({ length: B * T }, () => offset + (r() * 2 - 1) * scale);
}

const up = (engine: Engine, name: string, data: ArrayLike<number>) => engine.tensorFrom(name, [data.length], data);

// Student log-probs near the old ones (some ratios past the clip), teachers far enough for the clamp of 1.5 to bite.
const old = random(1, 1.5, -2);
const lp = old.map((v, i) => v + 0.4 * Math.sin(7 * i));
const teacher = random(2, 2.5, -2.5);
const isWeights = random(3, 0.5, 1);
const priorGrads = random(4, 1, 0);

interface Case {
  mode: string;
  pg: boolean;
  clamp: number | null;
  agg: string;
  weights?: boolean;
  accumulate?: boolean;
}

const cases: Case[] = [
  ...['k1', 'k2', 'k3', 'abs', 'low_var_kl+'].map((mode) => ({ mode, pg: true, clamp: 1.5, agg: 'token-mean' })),
  ...['k2', 'k3', 'abs', 'mse', 'kl+'].map((mode) => ({ mode, pg: false, clamp: 1.5, agg: 'token-mean' })),
  { mode: 'k3', pg: false, clamp: null, agg: 'token-mean', accumulate: true },
  { mode: 'k1', pg: true, clamp: null, agg: 'token-mean', weights: true, accumulate: true },
  // forward_kl_topk's KL made elsewhere (forward-kl-topk.test.ts checks the back-propagated path through the logits).
  { mode: 'precomputed', pg: true, clamp: 1.5, agg: 'token-mean' },
  ...LOSS_AGG_MODES.map((agg) => ({ mode: 'k3', pg: true, clamp: 1.5, agg })),
  ...LOSS_AGG_MODES.map((agg) => ({ mode: 'k3', pg: false, clamp: 1.5, agg })),
];

describe('distillation-loss kernel vs float64 reference', () => {
  for (const c of cases) {
    const name = `${c.mode} ${c.pg ? 'policy gradient' : 'direct'}, clamp ${c.clamp}, ${c.agg}`;
    it(`${name}${c.weights ? ', rollout_is weights' : ''}${c.accumulate ? ', added to the actor loss' : ''}`, async () => {
      const engine = await gpuEngine();
      const aggregation = localAggregation(c.agg, MASK, B, T);
      const coef = 0.7;
      const initial = new Float32Array(2 * B * T);
      if (c.accumulate) initial.set(Array.from(priorGrads).flatMap((g) => [g, -g]));
      const grads = up(engine, 'grads', initial);
      const rowPartials = engine.tensor('partials', [8 * B]);
      const lossGrad = engine.tensor('lossGrad', [B * T]);
      const precomputed = c.mode === 'precomputed';
      computeDistillationLossGpu(
        engine,
        {
          logProb: up(engine, 'lp', lp),
          oldLogProb: up(engine, 'old', old),
          teacher: up(engine, 'teacher', precomputed ? teacher.map(Math.abs) : teacher),
          responseMask: up(engine, 'mask', MASK),
          isWeights: c.weights ? up(engine, 'w', isWeights) : null,
          grads,
          rowPartials,
          lossGrad,
        },
        {
          lossMode: c.mode,
          usePolicyGradient: c.pg,
          lossMaxClamp: c.clamp,
          clipRatioLow: 0.2,
          clipRatioHigh: 0.28,
          coef,
          accumulate: c.accumulate === true,
          aggregation,
          B,
          T,
        },
      );
      const { losses, grad } = precomputed
        ? { losses: Float64Array.from(teacher, Math.abs), grad: Float64Array.from(teacher, () => 1) }
        : estimatorDistillationRef(lp, teacher, c.mode);
      const refArgs = {
        losses,
        lossGrad: grad,
        logProb: lp,
        oldLogProb: old,
        responseMask: MASK,
        aggregation,
        usePolicyGradient: c.pg,
        lossMaxClamp: c.clamp,
        clipRatioLow: 0.2,
        clipRatioHigh: 0.28,
        isWeights: c.weights ? isWeights : undefined,
        B,
        T,
      };
      const ref = combineDistillationRef(refArgs);
      const got = await engine.read(grads);
      const expected = new Float64Array(2 * B * T);
      for (let i = 0; i < B * T; i++) {
        expected[2 * i] = initial[2 * i] + coef * ref.gradLogProb[i];
        expected[2 * i + 1] = initial[2 * i + 1];
      }
      expectClose(got, expected, 1e-5, 1e-4, 'grads');
      // The back-propagated path's gradient per token (precomputed: d loss / d the token's loss, by which
      // forward_kl_topk scales its logits gradient).
      const perToken = c.pg ? new Float64Array(B * T) : ref.gradLogProb.map((g) => coef * g);
      expectClose(await engine.read(lossGrad), perToken, 1e-6, 1e-4, 'lossGrad');
      const totals = distillationPartialTotals(await engine.read(rowPartials), B);
      expect(Math.abs(totals.loss - ref.loss)).toBeLessThan(1e-6 * (1 + Math.abs(ref.loss)));
      const valid = Array.from(losses).filter((_, i) => MASK[i] === 1);
      expect(totals.token_count).toBe(valid.length);
      expect(totals.abs_loss_sum).toBeCloseTo(
        valid.reduce((a, l) => a + Math.abs(l), 0),
        2,
      );
      expect(totals.loss_min).toBeCloseTo(Math.min(...valid), 5);
      expect(totals.loss_max).toBeCloseTo(Math.max(...valid), 5);
      // The cases must reach what they name: the clamp bites, the policy gradient clips.
      if (c.clamp !== null && c.mode !== 'k1') expect(valid.some((l) => Math.abs(l) > c.clamp!)).toBe(true);
      if (c.pg) expect(totals.pg_clipped).toBeGreaterThan(0);
    });
  }
});
