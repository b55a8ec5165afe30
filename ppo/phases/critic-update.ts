// The critic's update over one step's experience: values of the response tokens (read one position before each
// token), verl's clipped value loss against the returns, the value-head and trunk backward, an AdamW step per
// mini-batch. A frozen critic never gets here (and has no optimizer state).
import type { Engine } from '../../engine/index.ts';
import type { Rng } from '../../engine/rng.ts';
import type { ValueModel } from '../../models/value-model.ts';
import type { AdamWOptimizer } from './adamw-optimizer.ts';
import type { Experience } from './experience.ts';
import { SequenceBufferPool } from './sequence-buffers.ts';
import { optimizerMicroBatches, type ScheduleConfig } from './mini-batches.ts';
import { gatherResponseValuesGpu, scatterResponseValueGradsGpu } from '../../kernels/response-values.ts';
import { computeValueLossGpu } from '../../kernels/value-loss.ts';
import { MetricAccumulator } from './metric-accumulator.ts';
import { checkFinite } from './finite-guard.ts';

export interface CriticUpdateConfig extends ScheduleConfig {
  cliprangeValue: number;
  lr: number;
}

export class CriticUpdater {
  private readonly pool: SequenceBufferPool;

  constructor(
    private readonly engine: Engine,
    private readonly critic: ValueModel,
    private readonly optimizer: AdamWOptimizer,
  ) {
    this.pool = new SequenceBufferPool(engine, critic.config.vocabSize);
  }

  async update(x: Experience, config: CriticUpdateConfig, rng: Rng): Promise<Record<string, number>> {
    const e = this.engine;
    if (!x.values) throw new Error('critic update: the experience has no values');
    const metrics = new MetricAccumulator();
    for await (const { mini, rows, buffers: b, batch } of optimizerMicroBatches(x, config, rng, this.pool, this.optimizer, metrics, 'critic/grad_norm')) {
      const { S, R } = b;
      const m = rows.length;
      b.uploadResponse(b.oldValues, x.values, rows);
      b.uploadResponse(b.returns, x.returns, rows);
      const values = this.critic.tokenValues(batch, { saveForBackward: true });
      gatherResponseValuesGpu(e, values, b.vpreds, m, S, R);
      computeValueLossGpu(e, {
        vpreds: b.vpreds, returns: b.returns, values: b.oldValues, responseMask: b.responseMask, gradVpreds: b.gradVpreds,
        rowPartials: b.valuePartials, out: b.valueOut, cliprangeValue: config.cliprangeValue, aggregation: mini.aggregation, B: m, T: R,
      });
      scatterResponseValueGradsGpu(e, b.dValues, b.gradVpreds, m, S, R);
      this.critic.backward(b.dValues, this.optimizer.grads);
      const [vfLoss, vfClipfrac, tokens] = await e.read(b.valueOut);
      checkFinite('critic/vf_loss', vfLoss);
      metrics.addSum(mini.rows, 'critic/vf_loss', vfLoss);
      metrics.addMean('critic/vf_clipfrac', vfClipfrac, tokens);
    }
    return { ...metrics.result(), 'critic/lr': config.lr };
  }
}
