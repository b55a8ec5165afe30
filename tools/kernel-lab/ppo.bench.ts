// Bench cases of ppo for `node tools/bench.js kernels` (tools/bench/kernels.ts runs them).
import { computeActorLossGpu, separateActorLossExtras } from '../../kernels/ppo/policy-loss.ts';
import { computeValueLossGpu } from '../../kernels/ppo/value-loss.ts';
import { computeGaeAdvantageReturnGpu } from '../../kernels/ppo/gae.ts';
import { computeOutcomeAdvantageGpu, groupLayout, groupTensors } from '../../kernels/ppo/advantage-outcome.ts';
import { applyKlPenaltyGpu } from '../../kernels/ppo/kl-penalty.ts';
import { computeActorLossRef } from '../../kernels/ppo/policy-loss.ref.ts';
import type { PolicyLossConfig } from '../../kernels/ppo/ppo-vocabulary.ts';
import { computeValueLossRef } from '../../kernels/ppo/value-loss.ref.ts';
import { computeGaeAdvantageReturnRef } from '../../kernels/ppo/gae.ref.ts';
import { computeOutcomeAdvantageRef } from '../../kernels/ppo/advantage-outcome.ref.ts';
import { applyKlPenaltyRef } from '../../kernels/ppo/kl-penalty.ref.ts';
import { localAggregation } from '../../kernels/ppo/agg-loss.ref.ts';
import {
  F32_BYTES,
  PPO_B,
  PPO_T,
  checkOutput,
  checkOutputs,
  checkValues,
  randomValues,
  responseMask,
  upload,
  type KernelBenchCase,
} from './bench-inputs.ts';

/** PPO's per-token kernels over a rollout batch of PPO_B responses of PPO_T tokens (ragged, by mask). */
export function ppoCases(): KernelBenchCase[] {
  const [Bp, Tp] = [PPO_B, PPO_T];
  const n = Bp * Tp;
  const mask = responseMask(31);
  const oldLogProb = randomValues(n, 32).map((x) => x - 1);
  const logProb = oldLogProb.map((x, i) => x + 0.05 * Math.sin(i));
  const refLogProb = oldLogProb.map((x, i) => x + 0.05 * Math.cos(i));
  const advantages = randomValues(n, 33);
  const entropy = randomValues(n, 34).map(Math.abs);
  const values = randomValues(n, 35);
  const vpreds = values.map((x, i) => x + 0.5 * Math.sin(i));
  const returns = randomValues(n, 36);
  const rewards = randomValues(n, 37);
  const aggregation = localAggregation('token-mean', mask, Bp, Tp);
  const policyConfig: PolicyLossConfig = { lossMode: 'vanilla', clipRatioLow: 0.2, clipRatioHigh: 0.28, clipRatioC: 3 };
  const actorTerms = { entropyCoeff: 1e-3, klLossCoef: 1e-3, klLossType: 'low_var_kl' };
  const groups = groupLayout(Array.from({ length: Bp }, (_, b) => b >> 3));
  const shape = `B=${Bp},T=${Tp}`;
  const computeActorLossExpected = () =>
    computeActorLossRef({
      oldLogProb,
      logProb,
      advantages,
      responseMask: mask,
      B: Bp,
      T: Tp,
      config: policyConfig,
      aggregation,
      terms: { ...actorTerms, entropy, refLogProb },
    });
  const computeValueLossExpected = () =>
    computeValueLossRef({
      vpreds,
      returns,
      values,
      responseMask: mask,
      cliprangeValue: 0.5,
      B: Bp,
      T: Tp,
      aggregation,
    });
  const computeGaeAdvantageReturnExpected = () =>
    computeGaeAdvantageReturnRef({
      tokenLevelRewards: rewards,
      values,
      responseMask: mask,
      gamma: 1,
      lam: 0.95,
      B: Bp,
      T: Tp,
    });
  const applyKlPenaltyExpected = () =>
    applyKlPenaltyRef({
      tokenLevelScores: rewards,
      oldLogProbs: oldLogProb,
      refLogProb,
      responseMask: mask,
      beta: 1e-3,
      klPenalty: 'kl',
      B: Bp,
      T: Tp,
    });
  const grpoAdvantageExpected = () =>
    computeOutcomeAdvantageRef('grpo', {
      tokenLevelRewards: rewards,
      responseMask: mask,
      groupOf: groups.groupOf,
      epsilon: 1e-6,
      normAdvByStd: true,
      B: Bp,
      T: Tp,
    });
  return [
    {
      op: 'policy-loss',
      kernel: 'policy loss',
      shape,
      bytes: F32_BYTES * (8 * n + 8 * Bp + 8),
      reference: computeActorLossExpected,
      setup: (engine) => {
        const t = {
          oldLogProb: upload(engine, 'oldLogProb', oldLogProb),
          logProb: upload(engine, 'logProb', logProb),
          advantages: upload(engine, 'advantages', advantages),
          responseMask: upload(engine, 'mask', mask),
          ...separateActorLossExtras(engine, Bp, Tp, {
            entropy: upload(engine, 'entropy', entropy),
            refLogProb: upload(engine, 'refLogProb', refLogProb),
          }),
          grads: engine.tensor('bench-grads', [n * 2]),
          rowPartials: engine.tensor('bench-rowPartials', [Bp * 8]),
          out: engine.tensor('bench-out', [8]),
        };
        return {
          run: () => computeActorLossGpu(engine, t, { config: policyConfig, aggregation, ...actorTerms, B: Bp, T: Tp }),
          check: async () => {
            const e = computeActorLossExpected();
            const out = await engine.read(t.out);
            // ACTOR_LOSS_OUTPUTS but token_count (4), which the reference does not return.
            const losses = checkValues(
              'out',
              [0, 1, 2, 3, 5, 6, 7].map((i) => out[i]),
              [e.pgLoss, e.pgClipfrac, e.ppoKl, e.pgClipfracLower, e.entropyAgg, e.klLoss, e.policyLoss],
              1e-5,
              1e-4,
            );
            const interleaved = Array.from(
              { length: 2 * n },
              (_, i) => (i % 2 ? e.gradEntropy : e.gradLogProb)[i >> 1],
            );
            const grads = await checkOutput(engine, 'grads', t.grads, interleaved, 1e-7, 1e-4);
            return grads.violation > losses.violation ? grads : losses;
          },
        };
      },
    },
    {
      op: 'value-loss',
      kernel: 'value loss',
      shape,
      bytes: F32_BYTES * (5 * n + 3 * Bp + 3),
      reference: computeValueLossExpected,
      setup: (engine) => {
        const t = {
          vpreds: upload(engine, 'vpreds', vpreds),
          returns: upload(engine, 'returns', returns),
          values: upload(engine, 'values', values),
          responseMask: upload(engine, 'mask', mask),
          gradVpreds: engine.tensor('bench-gradVpreds', [n]),
          rowPartials: engine.tensor('bench-rowPartials', [Bp * 3]),
          out: engine.tensor('bench-out', [3]),
        };
        return {
          run: () => computeValueLossGpu(engine, { ...t, cliprangeValue: 0.5, aggregation, B: Bp, T: Tp }),
          check: async () => {
            const e = computeValueLossExpected();
            const out = await engine.read(t.out);
            const losses = checkValues('out', [out[0], out[1]], [e.vfLoss, e.vfClipfrac], 1e-5, 1e-4);
            const grads = await checkOutput(engine, 'gradVpreds', t.gradVpreds, e.gradVpreds, 1e-7, 1e-4);
            return grads.violation > losses.violation ? grads : losses;
          },
        };
      },
    },
    {
      op: 'gae',
      kernel: 'gae',
      shape,
      bytes: F32_BYTES * 5 * n,
      reference: computeGaeAdvantageReturnExpected,
      setup: (engine) => {
        const t = {
          tokenLevelRewards: upload(engine, 'rewards', rewards),
          values: upload(engine, 'values', values),
          responseMask: upload(engine, 'mask', mask),
          advantages: engine.tensor('bench-advantages', [n]),
          returns: engine.tensor('bench-returns', [n]),
          stats: engine.tensor('bench-stats', [4]),
        };
        return {
          run: () => computeGaeAdvantageReturnGpu(engine, { ...t, gamma: 1, lam: 0.95, B: Bp, T: Tp }),
          check: () => {
            const e = computeGaeAdvantageReturnExpected();
            return checkOutputs(engine, [
              ['advantages', t.advantages, e.advantages, 1e-4, 1e-4],
              ['returns', t.returns, e.returns, 1e-4, 1e-4],
            ]);
          },
        };
      },
    },
    {
      op: 'advantage-outcome',
      kernel: 'grpo advantage',
      shape: `${shape},group=8`,
      bytes: F32_BYTES * (3 * n + 2 * Bp + groups.groupStart.length),
      reference: grpoAdvantageExpected,
      setup: (engine) => {
        const t = {
          tokenLevelRewards: upload(engine, 'rewards', rewards),
          responseMask: upload(engine, 'mask', mask),
          ...groupTensors(engine, groups),
          rowStats: engine.tensor('bench-rowStats', [2 * Bp]),
          stats: engine.tensor('bench-stats', [4]),
          advantages: engine.tensor('bench-advantages', [n]),
        };
        return {
          run: () =>
            computeOutcomeAdvantageGpu(engine, 'grpo', { ...t, epsilon: 1e-6, normAdvByStd: true, B: Bp, T: Tp }),
          check: () => checkOutput(engine, 'advantages', t.advantages, grpoAdvantageExpected(), 1e-4, 1e-4),
        };
      },
    },
    {
      op: 'kl-penalty',
      kernel: 'apply kl penalty',
      shape,
      bytes: F32_BYTES * (5 * n + Bp),
      reference: applyKlPenaltyExpected,
      setup: (engine) => {
        const t = {
          tokenLevelScores: upload(engine, 'scores', rewards),
          oldLogProbs: upload(engine, 'oldLogProb', oldLogProb),
          refLogProb: upload(engine, 'refLogProb', refLogProb),
          responseMask: upload(engine, 'mask', mask),
          tokenLevelRewards: engine.tensor('bench-rewards', [n]),
          rowKl: engine.tensor('bench-rowKl', [Bp]),
        };
        return {
          run: () => applyKlPenaltyGpu(engine, { ...t, beta: 1e-3, klPenalty: 'kl', B: Bp, T: Tp }),
          check: () => {
            const e = applyKlPenaltyExpected();
            return checkOutputs(engine, [
              ['tokenLevelRewards', t.tokenLevelRewards, e.tokenLevelRewards, 1e-6, 1e-5],
              ['rowKl', t.rowKl, e.rowKl, 1e-5, 1e-4],
            ]);
          },
        };
      },
    },
  ];
}
