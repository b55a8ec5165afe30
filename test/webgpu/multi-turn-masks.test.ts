// Multi-turn experience: observation tokens (response_mask 0 inside a response) must not reach any loss or
// gradient, and the outcome reward must sit on the last token the policy generated, not on a trailing
// observation. Checked through the trainer's own ExperienceMaker, ActorUpdater and CriticUpdater.
import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import type { Engine } from '../../engine/index.ts';
import { Rng } from '../../engine/rng.ts';
import { parseHfConfig, withHead, type DecoderConfig } from '../../models/hf-config.ts';
import { initialParameters } from '../../models/init.ts';
import { createParameterArena, readHfTensors, uploadArenaTensors } from '../../models/parameter-store.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { ValueModel } from '../../models/value-model.ts';
import { AdamWOptimizer } from '../../ppo/training/adamw-optimizer.ts';
import { ActorUpdater } from '../../ppo/phases/actor-update.ts';
import { CriticUpdater } from '../../ppo/phases/critic-update.ts';
import { ExperienceMaker, type Experience } from '../../ppo/phases/experience.ts';
import { experienceOnDevice } from '../support/experience-on-device.ts';
import { resolvePolicyLossConfig } from '../../ppo/algorithm/policy-loss-config.ts';
import { sampleRewardMask } from '../../ppo/algorithm/reward-mask.ts';
import type { RolloutBatch } from '../../ppo/generation/types.ts';

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
const P = 3;
const R = 9;
/** Per sample: 1 = generated, 0 = observation; trailing entries past the response are padding. */
const MASKS = [
  [1, 1, 0, 0, 0, 1, 1, 0, 0], // ends on an observation: the budget ran out after a search
  [1, 1, 1, 0, 0, 1, 1, 1, 1],
  [1, 0, 0, 1, 1, 0, 0, 0, 0], // 5 real tokens, then padding
  [1, 1, 1, 1, 1, 1, 1, 1, 1],
];
const LENGTHS = [8, 9, 5, 9];

function rolloutBatch(): RolloutBatch {
  const rng = new Rng(3);
  const token = () => 3 + Math.floor(rng.next() * (CONFIG.vocabSize - 3));
  const N = MASKS.length;
  const prompts = MASKS.map(() => Array.from({ length: P }, token));
  const responses = LENGTHS.map((n) => Array.from({ length: R }, (_, t) => (t < n ? token() : 0)));
  return {
    groupIds: [0, 0, 1, 1],
    promptLength: P,
    responseLength: R,
    prompts,
    responses,
    inputIds: prompts.map((p, i) => [...p, ...responses[i]]),
    attentionMask: LENGTHS.map((n) => [
      ...new Array(P).fill(1),
      ...Array.from({ length: R }, (_, t) => (t < n ? 1 : 0)),
    ]),
    positionIds: MASKS.map(() => Array.from({ length: P + R }, (_, t) => t)),
    responseMask: MASKS.map((m, i) => m.map((x, t) => (t < LENGTHS[i] ? x : 0))),
    oldLogProbs: MASKS.map(() => new Float32Array(R)),
    responseLengths: LENGTHS,
    finishReasons: new Array(N).fill('stop'),
  };
}

async function params(engine: Engine, config: DecoderConfig, label: string) {
  const arena = createParameterArena(engine, config, label);
  uploadArenaTensors(engine, arena, initialParameters(config, 9, 0.3));
  return arena;
}

async function experience(engine: Engine): Promise<Experience> {
  const rollout = rolloutBatch();
  const N = rollout.inputIds.length;
  const maker = new ExperienceMaker(engine, null, null, CONFIG.vocabSize);
  const plan = {
    advEstimator: 'grpo',
    gamma: 1,
    lam: 1,
    normAdvByStdInGrpo: true,
    useKlInReward: false,
    klPenalty: 'kl',
    temperature: 1,
    calculateLogProbs: false,
    calculateSumPiSquared: false,
    oldForward: { microBatchSize: N },
    refForward: { microBatchSize: N },
    valueForward: { microBatchSize: N },
  };
  const x = await maker.advantages(
    maker.begin(rollout, [1, 0.5, 0, 1], sampleRewardMask(new Rng(1), N, 0)),
    plan,
    null,
  );
  const rng = new Rng(4);
  const fill = () => Float32Array.from({ length: N * R }, () => -2 + rng.next());
  return experienceOnDevice(engine, {
    ...x,
    oldLogProbs: fill(),
    refLogProbs: fill(),
    values: fill(),
    returns: fill(),
    advantages: Float32Array.from({ length: N * R }, () => rng.next() - 0.5),
  });
}

/** A copy of the experience with every per-token input changed at the (sample, token) positions `where` picks. */
function perturbed(engine: Engine, x: Experience, where: (i: number, t: number) => boolean): Experience {
  const change = (a: Float32Array) => a.map((v, k) => (where(Math.floor(k / R), k % R) ? v + 5 : v));
  return experienceOnDevice(engine, {
    ...x,
    oldLogProbs: change(x.oldLogProbs),
    refLogProbs: change(x.refLogProbs!),
    values: change(x.values!),
    returns: change(x.returns),
    advantages: change(x.advantages),
  });
}

const isObservation = (i: number, t: number) => t < LENGTHS[i] && MASKS[i][t] === 0;

const SCHEDULE = { epochs: 1, miniBatchSize: 4, microBatchSize: 2, shuffle: false, lossAggMode: 'token-mean' };

/** Actor and critic after one update on `x` from the same initial weights: losses and updated weights. */
async function update(engine: Engine, x: Experience, label: string) {
  const actorParams = await params(engine, CONFIG, `${label}-actor`);
  const actor = new CausalLm(engine, CONFIG, actorParams);
  const actorOptimizer = new AdamWOptimizer(engine, actorParams, {
    lr: 1e-2,
    betas: [0.9, 0.999],
    eps: 1e-8,
    weightDecay: 0,
    maxGradNorm: 1e9,
  });
  const actorMetrics = await new ActorUpdater(engine, actor, actorOptimizer).update(
    x,
    {
      ...SCHEDULE,
      policyLoss: resolvePolicyLossConfig({ lossMode: 'vanilla', clipRatio: 0.2, clipRatioC: 3 }),
      entropyCoeff: 0.01,
      useKlLoss: true,
      klLossCoef: 0.1,
      klLossType: 'low_var_kl',
      temperature: 1,
      lr: 1e-2,
      bypass: null,
    },
    new Rng(5),
  );
  const criticConfig = withHead(CONFIG, 'token-classification');
  const criticParams = await params(engine, criticConfig, `${label}-critic`);
  const critic = new ValueModel(engine, criticConfig, criticParams);
  const criticOptimizer = new AdamWOptimizer(engine, criticParams, {
    lr: 1e-2,
    betas: [0.9, 0.999],
    eps: 1e-8,
    weightDecay: 0,
    maxGradNorm: 1e9,
  });
  const criticMetrics = await new CriticUpdater(engine, critic, criticOptimizer).update(
    x,
    { ...SCHEDULE, cliprangeValue: 0.5, lr: 1e-2 },
    new Rng(5),
  );
  const weights = async (arena: typeof actorParams, config: DecoderConfig) =>
    [...(await readHfTensors(engine, arena, config)).values()].map((t) => Array.from(t.data));
  return {
    metrics: { ...actorMetrics, ...criticMetrics },
    actor: await weights(actorParams, CONFIG),
    critic: await weights(criticParams, criticConfig),
  };
}

describe('multi-turn masks', () => {
  it('puts the outcome reward on the last generated token, never on an observation', async () => {
    const engine = await gpuEngine();
    const x = await experience(engine);
    const scores = [1, 0.5, 0, 1];
    MASKS.forEach((_, i) => {
      const last = x.rollout.responseMask[i].lastIndexOf(1);
      for (let t = 0; t < R; t++)
        expect(x.tokenLevelRewards[i * R + t], `sample ${i} token ${t}`).toBe(t === last ? scores[i] : 0);
    });
    expect(x.rollout.responseMask[0].lastIndexOf(1)).toBe(6);
  });

  it(
    "perturbing observation tokens' log-probs, values, returns and advantages changes no loss and no " + 'gradient',
    async () => {
      const engine = await gpuEngine();
      const x = await experience(engine);
      const base = await update(engine, x, 'base');
      const observed = await update(engine, perturbed(engine, x, isObservation), 'observed');
      expect(observed.metrics).toEqual(base.metrics);
      expect(observed.actor).toEqual(base.actor);
      expect(observed.critic).toEqual(base.critic);
      // The same perturbation on one generated token changes both updates: the comparison can fail.
      const generated = await update(
        engine,
        perturbed(engine, x, (i, t) => i === 1 && t === 5),
        'generated',
      );
      expect(generated.actor).not.toEqual(base.actor);
      expect(generated.critic).not.toEqual(base.critic);
    },
  );
});
