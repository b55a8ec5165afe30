// Token-budget micro-batches (use_dynamic_bsz): sequences of very different prompt and response lengths, grouped by
// length and each micro-batch padded only to its own longest prompt and response, must give the reference
// log-probs, values, losses and gradients of one fixed micro-batch holding the whole padded mini-batch, up to
// float rounding. Checked through the trainer's own ExperienceMaker, ActorUpdater and CriticUpdater.
import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { raggedRolloutBatch } from '../support/ragged-rollout.ts';
import type { Engine } from '../../engine/index.ts';
import { Rng } from '../../engine/rng.ts';
import { parseHfConfig, withHead, type DecoderConfig } from '../../models/hf-config.ts';
import { initialParameters } from '../../models/init.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { ValueModel } from '../../models/value-model.ts';
import { AdamWOptimizer } from '../../ppo/training/adamw-optimizer.ts';
import { ActorUpdater } from '../../ppo/phases/actor-update.ts';
import { CriticUpdater } from '../../ppo/phases/critic-update.ts';
import { ExperienceMaker, type Experience } from '../../ppo/phases/experience.ts';
import { experienceOnDevice } from '../support/experience-on-device.ts';
import { planMicroBatches, type MicroBatching } from '../../ppo/training/micro-batches.ts';
import { resolvePolicyLossConfig } from '../../ppo/algorithm/policy-loss-config.ts';
import { sampleRewardMask } from '../../ppo/algorithm/reward-mask.ts';
import type { RolloutBatch } from '../../ppo/generation/types.ts';
import { BYPASS_LOSS_MODES, type BypassCorrectionPlan } from '../../ppo/algorithm/bypass-correction.ts';
import { parseRolloutRs } from '../../ppo/config/rollout-rs-spec.ts';

const CONFIG: DecoderConfig = parseHfConfig({
  architectures: ['Qwen3ForCausalLM'],
  vocab_size: 37,
  hidden_size: 32,
  intermediate_size: 48,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 8,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  tie_word_embeddings: true,
});
const P = 9;
const R = 16;
const PROMPT_LENGTHS = [9, 2, 5, 1, 7, 3, 9, 4];
const RESPONSE_LENGTHS = [16, 3, 9, 1, 12, 5, 2, 16];
const N = PROMPT_LENGTHS.length;
/** 8 sequences of 25 padded columns (200 tokens); their real lengths add up to 134. */
const BUDGET = 40;

function rolloutBatch(): RolloutBatch {
  return raggedRolloutBatch({
    promptLengths: PROMPT_LENGTHS,
    responseLengths: RESPONSE_LENGTHS,
    P,
    R,
    vocabSize: CONFIG.vocabSize,
    seed: 3,
  });
}

function arena(engine: Engine, config: DecoderConfig, label: string) {
  const params = createParameterArena(engine, config, label);
  uploadArenaTensors(engine, params, initialParameters(config, 9, 0.3));
  return params;
}

async function experience(engine: Engine, forward: MicroBatching): Promise<Experience> {
  const reference = new CausalLm(engine, CONFIG, arena(engine, CONFIG, 'mb-reference'));
  const criticConfig = withHead(CONFIG, 'token-classification');
  const critic = new ValueModel(engine, criticConfig, arena(engine, criticConfig, 'mb-values'));
  const maker = new ExperienceMaker(engine, reference, critic, CONFIG.vocabSize);
  const plan = {
    advEstimator: 'gae',
    gamma: 1,
    lam: 0.95,
    normAdvByStdInGrpo: true,
    useKlInReward: false,
    klPenalty: 'kl',
    temperature: 1,
    calculateLogProbs: false,
    calculateSumPiSquared: false,
    oldForward: forward,
    refForward: forward,
    valueForward: forward,
  };
  const batch = maker.begin(rolloutBatch(), [1, 0.5, 0, 1, 0, 0, 1, 0.3], sampleRewardMask(new Rng(1), N, 0));
  await maker.referenceLogProbs(batch, plan);
  await maker.values(batch, plan);
  const x = await maker.advantages(batch, plan, null);
  const rng = new Rng(4);
  return experienceOnDevice(engine, { ...x, oldLogProbs: x.refLogProbs!.map((v) => v + 0.2 * (rng.next() - 0.5)) });
}

/**
 * Gradients (before the AdamW step is applied they are what it reads) and metrics of one actor and one critic update.
 */
async function update(
  engine: Engine,
  x: Experience,
  split: MicroBatching,
  label: string,
  bypass: BypassCorrectionPlan | null = null,
) {
  const schedule = { epochs: 1, miniBatchSize: N, shuffle: false, lossAggMode: 'token-mean', ...split };
  const actorParams = arena(engine, CONFIG, `${label}-actor`);
  const actorOptimizer = new AdamWOptimizer(engine, actorParams, {
    lr: 0,
    betas: [0.9, 0.999],
    eps: 1e-8,
    weightDecay: 0,
    maxGradNorm: 1e9,
  });
  const actorMetrics = await new ActorUpdater(engine, new CausalLm(engine, CONFIG, actorParams), actorOptimizer).update(
    x,
    {
      ...schedule,
      policyLoss: resolvePolicyLossConfig({
        lossMode: bypass ? BYPASS_LOSS_MODES[bypass.lossType] : 'vanilla',
        clipRatio: 0.2,
        clipRatioC: 3,
      }),
      entropyCoeff: 0.01,
      useKlLoss: true,
      klLossCoef: 0.1,
      klLossType: 'low_var_kl',
      temperature: 1,
      lr: 0,
      bypass,
    },
    new Rng(5),
  );
  const criticConfig = withHead(CONFIG, 'token-classification');
  const criticParams = arena(engine, criticConfig, `${label}-critic`);
  const criticOptimizer = new AdamWOptimizer(engine, criticParams, {
    lr: 0,
    betas: [0.9, 0.999],
    eps: 1e-8,
    weightDecay: 0,
    maxGradNorm: 1e9,
  });
  const criticMetrics = await new CriticUpdater(
    engine,
    new ValueModel(engine, criticConfig, criticParams),
    criticOptimizer,
  ).update(x, { ...schedule, cliprangeValue: 0.5, lr: 0 }, new Rng(5));
  const grads = async (optimizer: AdamWOptimizer) => Promise.all(optimizer.grads.segments.map((s) => engine.read(s)));
  return {
    metrics: { ...actorMetrics, ...criticMetrics },
    actor: await grads(actorOptimizer),
    critic: await grads(criticOptimizer),
  };
}

function expectNear(got: ArrayLike<number>, want: ArrayLike<number>, what: string): void {
  expect(got.length).toBe(want.length);
  let scale = 0;
  for (let i = 0; i < want.length; i++) scale = Math.max(scale, Math.abs(want[i]));
  expect(scale, `${what} is not all zero`).toBeGreaterThan(0);
  for (let i = 0; i < want.length; i++)
    expect(Math.abs(got[i] - want[i]), `${what}[${i}]`).toBeLessThan(1e-5 * scale + 1e-7);
}

describe('token-budget micro-batches (use_dynamic_bsz)', () => {
  it('group similar lengths, each padded to its own longest prompt and response, within the budget', () => {
    const rollout = rolloutBatch();
    const plans = planMicroBatches(
      Array.from({ length: N }, (_, i) => i),
      rollout,
      { microBatchSize: N, maxTokens: BUDGET },
    );
    expect(plans.flatMap((p) => p.rows).sort()).toEqual(Array.from({ length: N }, (_, i) => i));
    for (const plan of plans) {
      expect(plan.rows.length * (plan.promptLength + plan.responseLength)).toBeLessThanOrEqual(BUDGET);
      expect(plan.promptLength).toBe(Math.max(...plan.rows.map((i) => PROMPT_LENGTHS[i])));
      expect(plan.responseLength).toBe(Math.max(...plan.rows.map((i) => RESPONSE_LENGTHS[i])));
    }
    const padded = plans.reduce((n, p) => n + p.rows.length * (p.promptLength + p.responseLength), 0);
    expect(padded).toBeLessThan(N * (P + R) * 0.8);
    expect(() =>
      planMicroBatches([0], rollout, {
        microBatchSize: 1,
        maxTokens: 20,
        maxTokensKey: 'actor_rollout_ref.actor.ppo_max_token_len_per_gpu',
      }),
    ).toThrow(/ppo_max_token_len_per_gpu=20 is below sequence 0's 25 tokens/);
  });

  it(
    'give the reference log-probs, values, losses and actor and critic gradients of one fixed ' + 'micro-batch',
    async () => {
      const engine = await gpuEngine();
      const fixed: MicroBatching = { microBatchSize: N };
      const budget: MicroBatching = { microBatchSize: N, maxTokens: BUDGET };
      const x = await experience(engine, fixed);
      const xBudget = await experience(engine, budget);
      // Response padding is outside every window: compared on response tokens.
      const onResponse = (a: Float32Array) => a.filter((_, k) => x.responseMask[k] === 1);
      expectNear(onResponse(xBudget.refLogProbs!), onResponse(x.refLogProbs!), 'ref log-probs');
      expectNear(onResponse(xBudget.values!), onResponse(x.values!), 'values');
      expectNear(onResponse(xBudget.advantages), onResponse(x.advantages), 'GAE advantages');
      const one = await update(engine, x, fixed, 'fixed');
      const many = await update(engine, x, budget, 'budget');
      for (const [name, value] of Object.entries(one.metrics)) expect(many.metrics[name], name).toBeCloseTo(value, 5);
      one.actor.forEach((g, s) => expectNear(many.actor[s], g, `actor gradient segment ${s}`));
      one.critic.forEach((g, s) => expectNear(many.critic[s], g, `critic gradient segment ${s}`));
      // The check can fail: dropping the last sequence's final response token changes the gradients.
      const shorter = experienceOnDevice(engine, {
        ...x,
        responseMask: x.responseMask.map((v, k) => (k === (N - 1) * R + R - 1 ? 0 : v)),
      });
      const changed = await update(engine, shorter, budget, 'changed');
      expect(() => changed.actor.forEach((g, s) => expectNear(g, one.actor[s], 'changed'))).toThrow();
    },
  );

  // Bypass mode picks per micro-batch on the host, each micro-batch cut to its own window of response columns.
  // Token-level weights and rejection do not depend on the split, so the gradients must not either. The actor
  // starts at the reference's weights and the experience's old (here: rollout) log-probs are the reference's
  // ± 0.1, so the bounds below truncate and reject a good share of the tokens.
  it(
    "bypass mode with token IS and token_k1 rejection: the fixed micro-batch's actor gradients and policy " + 'loss',
    async () => {
      const engine = await gpuEngine();
      const fixed: MicroBatching = { microBatchSize: N };
      const budget: MicroBatching = { microBatchSize: N, maxTokens: BUDGET };
      const x = await experience(engine, fixed);
      const bypass: BypassCorrectionPlan = {
        lossType: 'reinforce',
        rolloutIs: { level: 'token', threshold: 1.03, batchNormalize: false },
        rolloutRs: parseRolloutRs('token_k1', '0.95_1.05'),
      };
      const one = await update(engine, x, fixed, 'bypass-fixed', bypass);
      const many = await update(engine, x, budget, 'bypass-budget', bypass);
      expect(one.metrics['rollout_corr/rollout_rs_masked_fraction']).toBeGreaterThan(0.1);
      expect(one.metrics['rollout_corr/rollout_is_ratio_fraction_high']).toBeGreaterThan(0.1);
      expect(many.metrics['actor/pg_loss']).toBeCloseTo(one.metrics['actor/pg_loss'], 6);
      one.actor.forEach((g, s) => expectNear(many.actor[s], g, `actor gradient segment ${s}`));
      // The check can fail: without rejection the gradients differ.
      const unrejected = await update(engine, x, budget, 'bypass-unrejected', { ...bypass, rolloutRs: null });
      expect(() => unrejected.actor.forEach((g, s) => expectNear(g, one.actor[s], 'unrejected'))).toThrow();
    },
  );
});
