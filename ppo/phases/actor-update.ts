// The actor's PPO update over one step's experience: for each micro-batch, teacher-forced log-probs and entropy
// of the response tokens at the rollout temperature, the fused actor loss (clipped policy loss − entropy bonus +
// KL loss) with its per-token gradients, and the model backward; an AdamW step per mini-batch.
import type { Engine } from '../../engine/index.ts';
import type { Rng } from '../../engine/rng.ts';
import type { CausalLm } from '../../models/causal-lm.ts';
import type { AdamWOptimizer } from './adamw-optimizer.ts';
import type { Experience } from './experience.ts';
import { SequenceBufferPool } from './sequence-buffers.ts';
import { optimizerMicroBatches, type ScheduleConfig } from './mini-batches.ts';
import { gatherResponseValuesGpu } from '../../kernels/response-values.ts';
import { computeActorLossGpu, ACTOR_LOSS_OUTPUTS } from '../../kernels/policy-loss.ts';
import { scatterResponseGradsGpu } from '../../kernels/response-grads.ts';
import type { PolicyLossConfig } from '../../kernels/ppo-vocabulary.ts';
import { MetricAccumulator } from './metric-accumulator.ts';
import { checkFiniteRecord } from './finite-guard.ts';

export interface ActorUpdateConfig extends ScheduleConfig {
  policyLoss: PolicyLossConfig;
  entropyCoeff: number;
  useKlLoss: boolean;
  klLossCoef: number;
  klLossType: string;
  temperature: number;
  lr: number;
}

export class ActorUpdater {
  private readonly pool: SequenceBufferPool;

  constructor(
    private readonly engine: Engine,
    private readonly actor: CausalLm,
    private readonly optimizer: AdamWOptimizer,
  ) {
    this.pool = new SequenceBufferPool(engine, actor.config.vocabSize);
  }

  async update(x: Experience, config: ActorUpdateConfig, rng: Rng): Promise<Record<string, number>> {
    const e = this.engine;
    if (config.useKlLoss && !x.refLogProbs) throw new Error('actor.use_kl_loss needs the reference model');
    const metrics = new MetricAccumulator();
    for await (const { mini, rows, buffers: b, batch } of optimizerMicroBatches(x, config, rng, this.pool, this.optimizer, metrics, 'actor/grad_norm')) {
      const { S, R } = b;
      const m = rows.length;
      b.uploadResponse(b.oldLogProbs, x.oldLogProbs, rows);
      b.uploadResponse(b.advantages, x.advantages, rows);
      if (config.useKlLoss) b.uploadResponse(b.refLogProbs, x.refLogProbs!, rows);

      const out = this.actor.tokenLogprobs(batch, b.targets, { temperature: config.temperature, saveForBackward: true });
      gatherResponseValuesGpu(e, out.logprobs, b.logProbs, m, S, R);
      gatherResponseValuesGpu(e, out.entropy, b.entropy, m, S, R);
      computeActorLossGpu(e, {
        oldLogProb: b.oldLogProbs, logProb: b.logProbs, advantages: b.advantages, responseMask: b.responseMask,
        entropy: b.entropy, refLogProb: config.useKlLoss ? b.refLogProbs : undefined,
        grads: b.actorGrads, rowPartials: b.actorPartials, out: b.actorOut,
      }, {
        config: config.policyLoss, aggregation: mini.aggregation, entropyCoeff: config.entropyCoeff,
        klLossCoef: config.klLossCoef, klLossType: config.klLossType, B: m, T: R,
      });
      scatterResponseGradsGpu(e, { grads: b.actorGrads, dLogprobs: b.dLogprobs, dEntropy: b.dEntropy, B: m, S, T: R });
      this.actor.backward(b.dLogprobs, config.entropyCoeff !== 0 ? b.dEntropy : null, this.optimizer.grads);
      const values = await e.read(b.actorOut);
      // Loss terms are already scaled to the mini-batch, so micro-batches add; ratios are per micro-batch means.
      const named = Object.fromEntries(ACTOR_LOSS_OUTPUTS.map((name, i) => [name, values[i]]));
      checkFiniteRecord('actor', named);
      metrics.addSum(mini.rows, 'actor/pg_loss', named.pg_loss);
      metrics.addSum(mini.rows, 'actor/entropy', named.entropy_agg);
      metrics.addSum(mini.rows, 'actor/kl_loss', named.kl_loss);
      metrics.addSum(mini.rows, 'actor/policy_loss', named.policy_loss);
      metrics.addMean('actor/pg_clipfrac', named.pg_clipfrac, named.token_count);
      metrics.addMean('actor/pg_clipfrac_lower', named.pg_clipfrac_lower, named.token_count);
      metrics.addMean('actor/ppo_kl', named.ppo_kl, named.token_count);
    }
    const result = metrics.result();
    if (!config.useKlLoss) delete result['actor/kl_loss'];
    result['actor/lr'] = config.lr;
    return result;
  }
}
