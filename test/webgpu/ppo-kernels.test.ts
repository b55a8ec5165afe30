// The PPO kernels against their float64 references on odd shapes: rows longer than a workgroup (T = 70),
// interior observation gaps, empty rows, T = 1, singleton groups; and the micro-batch property on the GPU.
import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { expectClose, seededRandom } from '../support/arrays.ts';
import type { Engine } from '../../engine/index.ts';
import { computeGaeAdvantageReturnGpu } from '../../kernels/ppo/gae.ts';
import { computeGaeAdvantageReturnRef } from '../../kernels/ppo/gae.ref.ts';
import {
  computeReinforcePlusPlusOutcomeAdvantageGpu,
  computeRemaxOutcomeAdvantageGpu,
} from '../../kernels/ppo/reverse-returns.ts';
import {
  computeReinforcePlusPlusOutcomeAdvantageRef,
  computeRemaxOutcomeAdvantageRef,
} from '../../kernels/ppo/reverse-returns.ref.ts';
import { computeOutcomeAdvantageGpu, groupLayout, groupTensors } from '../../kernels/ppo/advantage-outcome.ts';
import { computeGdpoAdvantageRef, computeOutcomeAdvantageRef } from '../../kernels/ppo/advantage-outcome.ref.ts';
import {
  LOSS_AGG_MODES,
  OUTCOME_ESTIMATORS,
  type LossAggregation,
  type PolicyLossConfig,
} from '../../kernels/ppo/ppo-vocabulary.ts';
import { computeActorLossGpu, separateActorLossExtras } from '../../kernels/ppo/policy-loss.ts';
import { computeActorLossRef } from '../../kernels/ppo/policy-loss.ref.ts';
import {
  computeOptimalTokenBaselineRef,
  computeMultiTurnOptimalTokenBaselineRef,
} from '../../kernels/ppo/optimal-token-baseline.ref.ts';
import { computeAdvantagesGpu } from '../../ppo/algorithm/advantage-estimators.ts';
import { zeroTailStarts } from '../../kernels/ppo/zero-tail.ts';
import { selectCovarianceTokens, shuffledIndices } from '../../kernels/ppo/covariance-selection.ts';
import { computeValueLossGpu } from '../../kernels/ppo/value-loss.ts';
import { computeValueLossRef } from '../../kernels/ppo/value-loss.ref.ts';
import { applyKlPenaltyGpu } from '../../kernels/ppo/kl-penalty.ts';
import { applyKlPenaltyRef } from '../../kernels/ppo/kl-penalty.ref.ts';
import { localAggregation } from '../../kernels/ppo/agg-loss.ref.ts';
import { logprobEntropyBackwardGpu, logprobEntropyGpu } from '../../kernels/ppo/logprob-entropy.ts';
import { logprobEntropyBackwardRef, logprobEntropyRef } from '../../kernels/ppo/logprob-entropy.ref.ts';
import { gatherResponseValuesGpu, scatterResponseValueGradsGpu } from '../../kernels/ppo/response-values.ts';
import { gatherResponseValuesRef, scatterResponseValueGradsRef } from '../../kernels/ppo/response-values.ref.ts';

const B = 7;
const T = 70;
// Lengths with interior gaps (multi-turn observations) in rows 1 and 4, an empty row 5, a one-token row 6.
function mask(): Float32Array {
  const m = new Float32Array(B * T);
  const lengths = [70, 55, 64, 3, 69, 0, 1];
  lengths.forEach((n, b) => {
    for (let t = 0; t < n; t++) m[b * T + t] = 1;
  });
  for (let t = 10; t < 25; t++) m[1 * T + t] = 0;
  for (let t = 30; t < 33; t++) m[4 * T + t] = 0;
  return m;
}
const MASK = mask();

function random(seed: number, n = B * T, scale = 1, offset = 0): Float32Array {
  const r = seededRandom(seed);
  return Float32Array.from({ length: n }, () => offset + (r() * 2 - 1) * scale);
}

const up = (engine: Engine, name: string, data: ArrayLike<number>) => engine.tensorFrom(name, [data.length], data);

describe('advantage kernels', () => {
  it('GAE carries values and advantages across interior gaps, then whitens', async () => {
    const engine = await gpuEngine();
    const rewards = random(1, B * T, 0.1);
    const values = random(2).map((v, i) => v * MASK[i]);
    const advantages = engine.tensor('advantages', [B * T]);
    const returns = engine.tensor('returns', [B * T]);
    computeGaeAdvantageReturnGpu(engine, {
      tokenLevelRewards: up(engine, 'r', rewards),
      values: up(engine, 'v', values),
      responseMask: up(engine, 'm', MASK),
      advantages,
      returns,
      stats: engine.tensor('stats', [4]),
      gamma: 0.99,
      lam: 0.95,
      B,
      T,
    });
    const ref = computeGaeAdvantageReturnRef({
      tokenLevelRewards: rewards,
      values,
      responseMask: MASK,
      gamma: 0.99,
      lam: 0.95,
      B,
      T,
    });
    expectClose(await engine.read(returns), ref.returns, 1e-5, 1e-5, 'returns');
    expectClose(await engine.read(advantages), ref.advantages, 1e-5, 1e-5, 'advantages');
  });

  it('REINFORCE++ and ReMax return-to-go', async () => {
    const engine = await gpuEngine();
    const rewards = random(3, B * T, 0.2);
    const t = {
      tokenLevelRewards: up(engine, 'r', rewards),
      responseMask: up(engine, 'm', MASK),
      advantages: engine.tensor('a', [B * T]),
      returns: engine.tensor('ret', [B * T]),
      B,
      T,
    };
    computeReinforcePlusPlusOutcomeAdvantageGpu(engine, { ...t, gamma: 0.97, stats: engine.tensor('stats', [4]) });
    const rpp = computeReinforcePlusPlusOutcomeAdvantageRef(rewards, MASK, 0.97, B, T);
    expectClose(await engine.read(t.returns), rpp.returns, 1e-5, 1e-5, 'rf++ returns');
    expectClose(await engine.read(t.advantages), rpp.advantages, 1e-5, 1e-5, 'rf++ advantages');
    const baselines = random(4, B);
    computeRemaxOutcomeAdvantageGpu(engine, { ...t, rewardBaselines: up(engine, 'baselines', baselines) });
    const remax = computeRemaxOutcomeAdvantageRef(rewards, baselines, MASK, B, T);
    expectClose(await engine.read(t.returns), remax.returns, 1e-5, 1e-5, 'remax returns');
    expectClose(await engine.read(t.advantages), remax.advantages, 1e-5, 1e-5, 'remax advantages');
  });

  for (const estimator of OUTCOME_ESTIMATORS) {
    for (const normAdvByStd of estimator.startsWith('grpo') ? [true, false] : [true]) {
      it(`${estimator}${normAdvByStd ? '' : ' without std'}: groups in any order, ties and singletons`, async () => {
        const engine = await gpuEngine();
        // grpo_passk needs two per group; the others also get a singleton group.
        const index =
          estimator === 'grpo_passk' ? ['a', 'b', 'a', 'c', 'b', 'c', 'a'] : ['a', 'b', 'a', 'c', 'b', 'a', 'd'];
        const rewards = random(5, B * T, 0.05);
        rewards[3 * T] = rewards[0];
        // gpg's α counts the sequences with a non-zero score: make one score zero.
        for (let t = 0; t < T; t++) rewards[T + t] = 0;
        const fNorm = estimator === 'gpg' ? 0.5 : 1;
        const layout = groupLayout(index);
        const advantages = engine.tensor('a', [B * T]);
        computeOutcomeAdvantageGpu(engine, estimator, {
          tokenLevelRewards: up(engine, 'r', rewards),
          responseMask: up(engine, 'm', MASK),
          ...groupTensors(engine, layout),
          rowStats: engine.tensor('rowStats', [2 * B]),
          stats: engine.tensor('stats', [4]),
          advantages,
          epsilon: 1e-6,
          normAdvByStd,
          fNorm,
          B,
          T,
        });
        const ref = computeOutcomeAdvantageRef(estimator, {
          tokenLevelRewards: rewards,
          responseMask: MASK,
          groupOf: layout.groupOf,
          epsilon: 1e-6,
          normAdvByStd,
          fNorm,
          B,
          T,
        });
        expectClose(await engine.read(advantages), ref, 1e-5, 1e-4, estimator);
      });
    }
  }
});

// GDPO through the trainer's dispatch: two reward keys with weights 1 and 0.5, groups with a tie and a singleton.
it('gdpo: per-key GRPO, weighted, whitened (computeAdvantagesGpu against the float64 reference)', async () => {
  const engine = await gpuEngine();
  const index = ['a', 'b', 'a', 'c', 'b', 'a', 'd'];
  const keyScores = [random(11, B, 1), random(12, B, 2)];
  keyScores[1][2] = keyScores[1][0];
  const weights = [1, 0.5];
  const advantages = engine.tensor('a', [B * T]);
  const returns = engine.tensor('r', [B * T]);
  computeAdvantagesGpu(engine, 'gdpo', {
    tokenLevelRewards: up(engine, 'rewards', new Float64Array(B * T)),
    responseMask: up(engine, 'm', MASK),
    responseMaskHost: MASK,
    advantages,
    returns,
    index,
    stats: engine.tensor('stats', [4]),
    rowStats: engine.tensor('rowStats', [2 * B]),
    gamma: 1,
    lam: 1,
    normAdvByStd: true,
    epsilon: 1e-6,
    rewardKeyScores: { scores: keyScores.map((s) => Array.from(s)), weights },
    B,
    T,
  });
  const ref = computeGdpoAdvantageRef({
    keyScores,
    weights,
    responseMask: MASK,
    groupOf: groupLayout(index).groupOf,
    epsilon: 1e-6,
    normAdvByStd: true,
    B,
    T,
  });
  expectClose(await engine.read(advantages), ref, 1e-5, 1e-4, 'gdpo advantages');
  expectClose(await engine.read(returns), ref, 1e-5, 1e-4, 'gdpo returns');
});

interface OtbInputs {
  rewards: ArrayLike<number>;
  mask: ArrayLike<number>;
  index: readonly string[];
  old: ArrayLike<number>;
  sumPiSquared: ArrayLike<number>;
  isWeights?: ArrayLike<number>;
  handleZeroTail: boolean;
  B: number;
  T: number;
}

/** The trainer's path to the optimal-token-baseline kernel (it builds the groups and the zero tail on the host). */
async function optimalTokenBaselineGpu(
  estimator: 'optimal_token_baseline' | 'tir_optimal_token_baseline',
  x: OtbInputs,
) {
  const engine = await gpuEngine();
  const { B, T } = x;
  const advantages = engine.tensor('a', [B * T]);
  const returns = engine.tensor('r', [B * T]);
  computeAdvantagesGpu(engine, estimator, {
    tokenLevelRewards: up(engine, 'rewards', x.rewards),
    responseMask: up(engine, 'm', x.mask),
    responseMaskHost: x.mask,
    advantages,
    returns,
    index: x.index,
    stats: engine.tensor('stats', [4]),
    rowStats: engine.tensor('rowStats', [2 * B]),
    oldLogProbs: up(engine, 'old', x.old),
    sumPiSquared: up(engine, 'spi', x.sumPiSquared),
    rolloutIsWeights: x.isWeights ? up(engine, 'is', x.isWeights) : null,
    handleZeroTail: x.handleZeroTail,
    gamma: 1,
    lam: 1,
    normAdvByStd: true,
    epsilon: 1e-8,
    B,
    T,
  });
  return { advantages: await engine.read(advantages), returns: await engine.read(returns) };
}

function otbReference(estimator: 'optimal_token_baseline' | 'tir_optimal_token_baseline', x: OtbInputs) {
  const reference =
    estimator === 'optimal_token_baseline' ? computeOptimalTokenBaselineRef : computeMultiTurnOptimalTokenBaselineRef;
  return reference({
    tokenLevelRewards: x.rewards,
    responseMask: x.mask,
    groupOf: groupLayout(x.index).groupOf,
    oldLogProbs: x.old,
    sumPiSquared: x.sumPiSquared,
    rolloutIsWeights: x.isWeights,
    handleZeroTail: x.handleZeroTail,
    epsilon: 1e-8,
    B: x.B,
    T: x.T,
  });
}

/** MASK's rows with their gaps closed: the same lengths, right-padded. */
const RIGHT_PADDED = Float32Array.from(MASK, (_, i) => {
  const row = Math.floor(i / T);
  let length = 0;
  for (let t = 0; t < T; t++) length += MASK[row * T + t];
  return i % T < length ? 1 : 0;
});

describe('optimal token baselines', () => {
  const inputs = (
    seed: number,
    index: readonly string[],
    handleZeroTail: boolean,
    withIs: boolean,
    mask = MASK,
  ): OtbInputs => ({
    rewards: random(seed, B * T, 0.5),
    mask,
    index,
    old: random(seed + 1, B * T, 1, -2),
    // Σπ² of a distribution is in (0, 1].
    sumPiSquared: random(seed + 2, B * T, 0.4, 0.5),
    isWeights: withIs ? random(seed + 3, B * T, 0.3, 1) : undefined,
    handleZeroTail,
    B,
    T,
  });
  const cases = [
    [false, false],
    [true, true],
    [true, false],
    [false, true],
  ] as const;

  for (const [handleZeroTail, withIs] of cases.slice(0, 2)) {
    it(
      `optimal_token_baseline: groups with a singleton, ragged ` +
        `lengths${handleZeroTail ? ', handle_zero_tail and IS weights' : ''}`,
      async () => {
        const x = inputs(21, ['a', 'b', 'a', 'c', 'b', 'a', 'd'], handleZeroTail, withIs);
        if (handleZeroTail)
          expect(Array.from(zeroTailStarts(MASK, groupLayout(x.index).groupOf, B, T, true)).some((s) => s < T)).toBe(
            true,
          );
        const got = await optimalTokenBaselineGpu('optimal_token_baseline', x);
        const ref = otbReference('optimal_token_baseline', x);
        expectClose(got.returns, ref.returns, 1e-5, 1e-5, 'returns');
        expectClose(got.advantages, ref.advantages, 1e-4, 1e-4, 'advantages');
      },
    );
  }

  for (const [handleZeroTail, withIs] of cases) {
    it(
      `tir_optimal_token_baseline: interior gaps, an empty row beside one response, singletons, ` +
        `handle_zero_tail=${handleZeroTail}${withIs ? ', IS weights' : ''}`,
      async () => {
        // Row 5 (empty) shares group c with row 3 alone: verl leaves it out, so row 3 has no baseline.
        const x = inputs(31, ['a', 'b', 'a', 'c', 'b', 'c', 'd'], handleZeroTail, withIs);
        const got = await optimalTokenBaselineGpu('tir_optimal_token_baseline', x);
        const ref = otbReference('tir_optimal_token_baseline', x);
        expectClose(got.returns, ref.returns, 1e-5, 1e-5, 'returns');
        expectClose(got.advantages, ref.advantages, 1e-4, 1e-4, 'advantages');
        // Not the single-turn estimator: the gapped rows line up differently, and row 3 is a group of one.
        const otb = otbReference('optimal_token_baseline', x).advantages;
        expect(ref.advantages.some((a, i) => Math.abs(a - otb[i]) > 1e-3)).toBe(true);
        expectClose(
          ref.advantages.slice(3 * T, 4 * T),
          ref.returns.slice(3 * T, 4 * T).map((g, t) => g * MASK[3 * T + t]),
          1e-12,
          0,
          'row 3 (no baseline)',
        );
      },
    );
  }

  for (const handleZeroTail of [false, true]) {
    it(
      `tir_optimal_token_baseline on right-padded rows (no gaps) is optimal_token_baseline with the same ` +
        `handle_zero_tail=${handleZeroTail}`,
      async () => {
        // The empty row 5 is in group a beside two responses, where leaving it out changes nothing.
        const x = inputs(41, ['a', 'b', 'a', 'c', 'b', 'a', 'd'], handleZeroTail, true, RIGHT_PADDED);
        const otb = otbReference('optimal_token_baseline', x);
        expectClose(
          otbReference('tir_optimal_token_baseline', x).advantages,
          otb.advantages,
          1e-12,
          1e-12,
          'reference',
        );
        expectClose(
          (await optimalTokenBaselineGpu('tir_optimal_token_baseline', x)).advantages,
          otb.advantages,
          1e-4,
          1e-4,
          'kernel',
        );
      },
    );
  }

  it("tir_optimal_token_baseline: kernel and reference give verl's numbers", async () => {
    // Golden values: verl b178a3cd's compute_multi_turn_optimal_token_baseline_advantage ported line by line to
    // numpy (float64, torch's ops replaced one for one) and run on exactly these inputs, printed to 15 digits.
    const mask = [
      [1, 1, 0, 0, 1, 1, 1],
      [1, 1, 1, 1, 0, 0, 0],
      [1, 0, 0, 1, 0, 0, 0],
      [0, 0, 0, 0, 0, 0, 0],
      [1, 1, 1, 0, 0, 0, 0],
      [1, 1, 0, 1, 1, 0, 0],
      [1, 1, 1, 1, 0, 0, 0],
    ].flat();
    const wave = (fb: number, ft: number, phase: number, scale: number, offset: number) =>
      mask.map((_, i) => offset + scale * Math.sin(fb * Math.floor(i / 7) + ft * (i % 7) + phase));
    const x = {
      rewards: wave(1.3, 0.7, 0, 1, 0),
      mask,
      index: ['a', 'a', 'a', 'b', 'b', 'c', 'c'],
      old: wave(1.7, 2.3, 1, 0.3, -1),
      sumPiSquared: wave(1.1, 0.9, 2, 0.2, 0.5),
      B: 7,
      T: 7,
    };
    const returns = [
      -0.243153162709612, -0.243153162709612, -0.887370849947303, -0.887370849947303, -0.887370849947303,
      -1.22235900010321, -0.871575772413588, 2.04469439044987, 1.08113620503268, 0.171838778206999, -0.255541102026831,
      0, 0, 0, -0.484421885742637, -0.999923257564101, -0.999923257564101, -0.999923257564101, 0, 0, 0, 0, 0, 0, 0, 0,
      0, 0, -0.945789957037011, -0.0623353013168582, 0.311541363513378, 0, 0, 0, 0, 1.86763937331814, 1.65251938523033,
      0.858851521381175, 0.858851521381175, 0.124454423507062, 0, 0, 1.56238447832302, 0.563841132948415,
      -0.234645979675075, -0.457535893775321, 0, 0, 0,
    ];
    const golden: [OtbInputs, number[]][] = [
      [
        { ...x, isWeights: wave(0.5, 1.9, 3, 0.3, 1), handleZeroTail: true },
        [
          -0.622570780380798, -0.0856283507173863, 0, 0, -0.5196390349494, -0.479100847728058, -0.871575772413588,
          1.66527677277869, 1.23866101702491, 0.539570593204902, 0.487717050348319, 0, 0, 0, -0.863839503413823, 0, 0,
          -0.842398445571876, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -0.945789957037011, -0.0623353013168582, 0.311541363513378,
          0, 0, 0, 0, 0.184704450943091, 0.48140874323954, 0, 0.506820933795843, 0.256602668798481, 0, 0,
          -0.120550444052033, -0.607269509042374, -0.586676567260407, -0.325387648483902, 0, 0, 0,
        ],
      ],
      [
        { ...x, handleZeroTail: false },
        [
          -0.619814139177361, -0.113771478998441, 0, 0, -0.461758450242481, -0.428516498506179, -2.21904616903856e-9,
          1.66803341398212, 1.21051788874385, 0.597451177911821, 0.538301399570197, 0, 0, 0, -0.861082862210386, 0, 0,
          -0.870541573852931, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -0.945789957037011, -0.0623353013168582, 0.311541363513378,
          0, 0, 0, 0, 0.162239907359389, 0.486101358020899, 0, 0.489650088070856, 0.271960957888988, 0, 0,
          -0.143014987635735, -0.602576894261014, -0.603847412985394, -0.310029359393395, 0, 0, 0,
        ],
      ],
    ];
    for (const [inputs, advantages] of golden) {
      const ref = otbReference('tir_optimal_token_baseline', inputs);
      expectClose(ref.returns, returns, 1e-13, 1e-13, 'reference returns');
      expectClose(ref.advantages, advantages, 1e-13, 1e-13, 'reference advantages');
      const got = await optimalTokenBaselineGpu('tir_optimal_token_baseline', inputs);
      expectClose(got.returns, returns, 1e-5, 1e-5, 'kernel returns');
      expectClose(got.advantages, advantages, 1e-5, 1e-4, 'kernel advantages');
    }
  });
});

/** Random actor-loss inputs [B, T] drawn from seeds `seed`…`seed + 4`. */
function actorLossInputs(seed: number) {
  return {
    old: random(seed, B * T, 0.4, -1),
    lp: random(seed + 1, B * T, 0.4, -1),
    adv: random(seed + 2, B * T, 2),
    entropy: random(seed + 3, B * T, 1, 2),
    ref: random(seed + 4, B * T, 0.4, -1),
  };
}

/**
 * The actor-loss kernel against its float64 reference with the entropy bonus and the KL loss on (clip_cov and kl_cov
 * pick their tokens from the plain advantages, as verl's do). With `isWeights` (rollout_is) the policy term and its
 * gradient are the weighted reference's and the metrics the unweighted one's; with `policyMask` (bypass mode) the
 * policy term runs over the kept tokens. Returns both references.
 */
async function expectActorLossAsReference(
  config: PolicyLossConfig,
  aggMode: LossAggregation['mode'],
  inputs: ReturnType<typeof actorLossInputs>,
  {
    klLossType = 'low_var_kl',
    isWeights,
    policyMask,
  }: { klLossType?: string; isWeights?: Float32Array; policyMask?: Float32Array } = {},
) {
  const engine = await gpuEngine();
  const { old, lp, adv, entropy, ref } = inputs;
  const aggregation = localAggregation(aggMode, MASK, B, T);
  const covariance = config.lossMode === 'clip_cov' || config.lossMode === 'kl_cov';
  const selected = covariance
    ? selectCovarianceTokens(
        config.lossMode as 'clip_cov' | 'kl_cov',
        {
          oldLogProb: old,
          logProb: lp,
          advantages: adv,
          responseMask: MASK,
          clipRatioLow: config.clipRatioLow,
          clipRatioHigh: config.clipRatioHigh,
          clipCovRatio: config.clipCovRatio ?? 0,
          clipCovLb: config.clipCovLb ?? 0,
          clipCovUb: config.clipCovUb ?? 0,
          klCovRatio: config.klCovRatio ?? 0,
        },
        shuffledIndices(seededRandom(3)),
      )
    : undefined;
  if (selected) expect(selected.reduce((a, v) => a + v, 0)).toBeGreaterThan(1);
  const grads = engine.tensor('grads', [B * T * 2]);
  const out = engine.tensor('out', [8]);
  computeActorLossGpu(
    engine,
    {
      oldLogProb: up(engine, 'old', old),
      logProb: up(engine, 'lp', lp),
      advantages: up(engine, 'adv', adv),
      responseMask: up(engine, 'm', MASK),
      ...separateActorLossExtras(engine, B, T, {
        entropy: up(engine, 'entropy', entropy),
        refLogProb: up(engine, 'ref', ref),
        selected: selected ? up(engine, 'selected', selected) : undefined,
        policyMask: policyMask ? up(engine, 'policyMask', policyMask) : undefined,
        isWeights: isWeights ? up(engine, 'isWeights', isWeights) : undefined,
      }),
      grads,
      rowPartials: engine.tensor('partials', [8 * B]),
      out,
    },
    { config, aggregation, entropyCoeff: 0.01, klLossCoef: 0.05, klLossType, B, T, geoMeanRows: B + 2 },
  );
  const reference = (weights?: Float32Array) =>
    computeActorLossRef({
      oldLogProb: old,
      logProb: lp,
      advantages: adv,
      responseMask: MASK,
      B,
      T,
      config,
      aggregation,
      selected,
      policyMask,
      geoMeanRows: B + 2,
      isWeights: weights,
      terms: { entropyCoeff: 0.01, entropy, klLossCoef: 0.05, klLossType, refLogProb: ref },
    });
  const expected = reference(isWeights);
  const plain = isWeights ? reference() : expected;
  const policyTokens = Array.from(MASK).reduce((a, m, i) => a + m * (policyMask ? policyMask[i] : 1), 0);
  const o = await engine.read(out);
  expectClose(
    o,
    [
      expected.pgLoss,
      plain.pgClipfrac,
      plain.ppoKl,
      plain.pgClipfracLower,
      policyTokens,
      expected.entropyAgg,
      expected.klLoss,
      expected.policyLoss,
    ],
    1e-5,
    1e-5,
    'losses and metrics',
  );
  const g = await engine.read(grads);
  expectClose(
    g.filter((_, i) => i % 2 === 0),
    expected.gradLogProb,
    1e-6,
    1e-4,
    'd loss / d log_prob',
  );
  expectClose(
    g.filter((_, i) => i % 2 === 1),
    expected.gradEntropy,
    1e-7,
    1e-5,
    'd loss / d entropy',
  );
  return { expected, plain };
}

describe('loss kernels', () => {
  const configs: PolicyLossConfig[] = [
    { lossMode: 'vanilla', clipRatioLow: 0.2, clipRatioHigh: 0.28, clipRatioC: 3 },
    { lossMode: 'gspo', clipRatioLow: 3e-4, clipRatioHigh: 4e-4, clipRatioC: 3 },
  ];
  for (const config of configs) {
    for (const mode of LOSS_AGG_MODES) {
      it(
        `actor loss ${config.lossMode} ${mode} with entropy bonus and ` +
          `${config.lossMode === 'vanilla' ? 'k3' : 'k1+'} KL loss`,
        async () => {
          const inputs = actorLossInputs(6);
          inputs.lp[5] = inputs.old[5] + 25;
          const klLossType = config.lossMode === 'vanilla' ? 'low_var_kl' : 'k1+';
          await expectActorLossAsReference(config, mode, inputs, { klLossType });
        },
      );
    }
  }

  // The losses verl added after vanilla and GSPO; clip_cov and kl_cov with wide enough settings that several tokens are
  // picked.
  const newModes: PolicyLossConfig[] = [
    { lossMode: 'gpg', clipRatioLow: 0.2, clipRatioHigh: 0.2, clipRatioC: 3 },
    { lossMode: 'geo_mean', clipRatioLow: 0.1, clipRatioHigh: 0.15, clipRatioC: 3 },
    { lossMode: 'cispo', clipRatioLow: 0.2, clipRatioHigh: 0.28, clipRatioC: 3 },
    { lossMode: 'sapo', clipRatioLow: 0.2, clipRatioHigh: 0.2, clipRatioC: 3, tauPos: 1, tauNeg: 1.05 },
    {
      lossMode: 'clip_cov',
      clipRatioLow: 0.2,
      clipRatioHigh: 0.2,
      clipRatioC: 3,
      clipCovRatio: 0.2,
      clipCovLb: 0,
      clipCovUb: 5,
    },
    { lossMode: 'kl_cov', clipRatioLow: 0.2, clipRatioHigh: 0.2, clipRatioC: 3, klCovRatio: 0.2, ppoKlCoef: 0.1 },
    { lossMode: 'dppo_tv', clipRatioLow: 0.05, clipRatioHigh: 0.04, clipRatioC: 1.1 },
    { lossMode: 'dppo_kl', clipRatioLow: 0.01, clipRatioHigh: 0.008, clipRatioC: 1.1 },
    { lossMode: 'dro', clipRatioLow: 0.2, clipRatioHigh: 0.2, clipRatioC: 3, droBeta: 0.7 },
  ];
  for (const config of newModes) {
    for (const mode of ['token-mean', 'seq-mean-token-sum', 'token-sum'] as const) {
      it(`actor loss ${config.lossMode} ${mode} with entropy bonus and KL loss`, async () => {
        await expectActorLossAsReference(config, mode, actorLossInputs(16));
      });
    }
  }

  // Rollout correction's importance weights in [0, 2], one valid token weighted 0: the policy term and its gradient
  // weighted (geo_mean per row, by the geometric mean), the metrics those of the unweighted loss.
  const weightedModes: PolicyLossConfig[] = [
    { lossMode: 'vanilla', clipRatioLow: 0.2, clipRatioHigh: 0.28, clipRatioC: 3 },
    { lossMode: 'geo_mean', clipRatioLow: 0.1, clipRatioHigh: 0.15, clipRatioC: 3 },
    {
      lossMode: 'clip_cov',
      clipRatioLow: 0.2,
      clipRatioHigh: 0.2,
      clipRatioC: 3,
      clipCovRatio: 0.2,
      clipCovLb: 0,
      clipCovUb: 5,
    },
    { lossMode: 'kl_cov', clipRatioLow: 0.2, clipRatioHigh: 0.2, clipRatioC: 3, klCovRatio: 0.2, ppoKlCoef: 0.1 },
  ];
  for (const config of weightedModes) {
    it(`actor loss ${config.lossMode} with rollout_is weights, entropy bonus and KL loss`, async () => {
      const isWeights = random(41, B * T, 1, 1);
      isWeights[2] = 0;
      const { expected, plain } = await expectActorLossAsReference(config, 'seq-mean-token-mean', actorLossInputs(36), {
        isWeights,
      });
      expect(Math.abs(expected.pgLoss - plain.pgLoss)).toBeGreaterThan(1e-3 * Math.abs(plain.pgLoss) + 1e-4);
    });
  }

  // Bypass-mode rejection sampling's kept tokens (the policy term's mask): one row wholly rejected, scattered tokens of
  // the rest.
  for (const lossMode of ['vanilla', 'gpg'] as const) {
    for (const mode of ['token-mean', 'seq-mean-token-mean'] as const) {
      it(`actor loss ${lossMode} ${mode} with a bypass policy mask`, async () => {
        const config: PolicyLossConfig = { lossMode, clipRatioLow: 0.2, clipRatioHigh: 0.28, clipRatioC: 3 };
        const policyMask = Float32Array.from({ length: B * T }, (_, i) =>
          Math.floor(i / T) === 1 || i % 5 === 3 ? 0 : 1,
        );
        await expectActorLossAsReference(config, mode, actorLossInputs(26), { policyMask });
      });
    }
  }

  it('token-mean over micro-batches sums to the mini-batch loss and gradients', async () => {
    const engine = await gpuEngine();
    const old = random(11, B * T, 0.3, -1);
    const lp = random(12, B * T, 0.3, -1);
    const adv = random(13, B * T, 1);
    const config: PolicyLossConfig = { lossMode: 'vanilla', clipRatioLow: 0.2, clipRatioHigh: 0.2, clipRatioC: 3 };
    const whole: LossAggregation = localAggregation('token-mean', MASK, B, T);
    const run = async (start: number, rows: number) => {
      const slice = (a: Float32Array) => a.slice(start * T, (start + rows) * T);
      const grads = engine.tensor('grads', [rows * T * 2]);
      const out = engine.tensor('out', [8]);
      computeActorLossGpu(
        engine,
        {
          oldLogProb: up(engine, 'old', slice(old)),
          logProb: up(engine, 'lp', slice(lp)),
          advantages: up(engine, 'adv', slice(adv)),
          responseMask: up(engine, 'm', slice(MASK)),
          ...separateActorLossExtras(engine, rows, T, {}),
          grads,
          rowPartials: engine.tensor('partials', [8 * rows]),
          out,
        },
        { config, aggregation: whole, entropyCoeff: 0, klLossCoef: 0, klLossType: 'kl', B: rows, T },
      );
      return { loss: (await engine.read(out))[0], grads: await engine.read(grads) };
    };
    const full = await run(0, B);
    const parts = [await run(0, 3), await run(3, 2), await run(5, 2)];
    expect(Math.abs(parts.reduce((a, p) => a + p.loss, 0) - full.loss)).toBeLessThan(1e-6);
    expectClose(
      Float32Array.from(parts.flatMap((p) => Array.from(p.grads))),
      full.grads,
      1e-7,
      1e-6,
      'micro-batch gradients',
    );
  });

  for (const mode of ['token-mean', 'seq-mean-token-mean', 'seq-mean-token-sum-norm']) {
    it(`value loss ${mode}`, async () => {
      const engine = await gpuEngine();
      const vpreds = random(14);
      const returns = random(15);
      const values = random(16);
      vpreds[7] = values[7] + 0.3;
      const aggregation = localAggregation(mode, MASK, B, T);
      const gradVpreds = engine.tensor('g', [B * T]);
      const out = engine.tensor('out', [3]);
      computeValueLossGpu(engine, {
        vpreds: up(engine, 'vp', vpreds),
        returns: up(engine, 'ret', returns),
        values: up(engine, 'v', values),
        responseMask: up(engine, 'm', MASK),
        gradVpreds,
        rowPartials: engine.tensor('partials', [3 * B]),
        out,
        cliprangeValue: 0.3,
        aggregation,
        B,
        T,
      });
      const ref = computeValueLossRef({
        vpreds,
        returns,
        values,
        responseMask: MASK,
        cliprangeValue: 0.3,
        B,
        T,
        aggregation,
      });
      const o = await engine.read(out);
      expectClose([o[0], o[1]], [ref.vfLoss, ref.vfClipfrac], 1e-5, 1e-5, 'vf_loss, vf_clipfrac');
      expectClose(await engine.read(gradVpreds), ref.gradVpreds, 1e-6, 1e-4, 'd vf_loss / d vpreds');
    });
  }

  it('in-reward KL penalty (k3) with rows longer than a workgroup', async () => {
    const engine = await gpuEngine();
    const scores = random(17, B * T, 0.1);
    const old = random(18, B * T, 0.5, -1);
    const ref = random(19, B * T, 0.5, -1);
    const rewards = engine.tensor('rewards', [B * T]);
    const rowKl = engine.tensor('rowKl', [B]);
    applyKlPenaltyGpu(engine, {
      tokenLevelScores: up(engine, 's', scores),
      oldLogProbs: up(engine, 'old', old),
      refLogProb: up(engine, 'ref', ref),
      responseMask: up(engine, 'm', MASK),
      tokenLevelRewards: rewards,
      rowKl,
      beta: 0.05,
      klPenalty: 'low_var_kl',
      B,
      T,
    });
    const expected = applyKlPenaltyRef({
      tokenLevelScores: scores,
      oldLogProbs: old,
      refLogProb: ref,
      responseMask: MASK,
      beta: 0.05,
      klPenalty: 'low_var_kl',
      B,
      T,
    });
    expectClose(await engine.read(rewards), expected.tokenLevelRewards, 1e-6, 1e-5, 'token_level_rewards');
    expectClose(await engine.read(rowKl), expected.rowKl, 1e-6, 1e-5, 'row kl');
  });

  it('log-probs, entropy and their backward for a vocabulary wider than a workgroup', async () => {
    const engine = await gpuEngine();
    const N = 5;
    const V = 131;
    const logits = random(20, N * V, 4);
    const labels = Uint32Array.from({ length: N }, (_, n) => (n * 37) % V);
    const coefficients = random(21, 2 * N);
    const logProb = engine.tensor('lp', [N]);
    const entropy = engine.tensor('h', [N]);
    const gradLogits = engine.tensor('g', [N * V]);
    const logitsT = up(engine, 'logits', logits);
    const labelsT = engine.tensorFrom('labels', [N], labels, 'u32');
    logprobEntropyGpu(engine, { logits: logitsT, labels: labelsT, logProb, entropy, N, V });
    logprobEntropyBackwardGpu(engine, {
      logits: logitsT,
      labels: labelsT,
      coefficients: up(engine, 'c', coefficients),
      gradLogits,
      N,
      V,
    });
    const ref = logprobEntropyRef(logits, labels, N, V);
    expectClose(await engine.read(logProb), ref.logProb, 1e-5, 1e-5, 'log-probs');
    expectClose(await engine.read(entropy), ref.entropy, 1e-5, 1e-5, 'entropy');
    const gl = coefficients.filter((_, i) => i % 2 === 0);
    const ge = coefficients.filter((_, i) => i % 2 === 1);
    expectClose(
      await engine.read(gradLogits),
      logprobEntropyBackwardRef(logits, labels, gl, ge, N, V),
      1e-6,
      1e-4,
      'd/d logits',
    );
  });
});

describe('critic values and reward mask', () => {
  it('reads the value of response token t at position t − 1 and scatters its gradient back', async () => {
    const engine = await gpuEngine();
    const S = 12;
    const Tr = 5;
    const sequence = random(22, 3 * S);
    const response = engine.tensor('response', [3 * Tr]);
    const seqT = up(engine, 'sequence', sequence);
    gatherResponseValuesGpu(engine, seqT, response, 3, S, Tr);
    expect(Array.from(await engine.read(response))).toEqual(Array.from(gatherResponseValuesRef(sequence, 3, S, Tr)));
    const grad = random(23, 3 * Tr);
    scatterResponseValueGradsGpu(engine, seqT, up(engine, 'grad', grad), 3, S, Tr);
    expect(Array.from(await engine.read(seqT))).toEqual(Array.from(scatterResponseValueGradsRef(grad, 3, S, Tr)));
  });
});
