// The critic's update over one step's experience (ppo/training/update-loop.ts runs the epochs, mini-batches and
// AdamW steps): for each micro-batch, values of the response tokens (read one position before each token),
// verl's clipped value loss against the returns, and the value-head and trunk backward. The micro-batch's old
// values and returns are gathered from the experience's device tensors; its loss outputs wait in the update's
// metric log. A frozen critic never gets here (and has no optimizer state).
import type { Engine } from '../../engine/index.ts';
import type { Rng } from '../../engine/rng.ts';
import type { ValueModel } from '../../models/value-model.ts';
import type { AdamWOptimizer } from '../training/adamw-optimizer.ts';
import type { Experience } from './experience.ts';
import { SequenceBufferPool } from '../training/sequence-buffers.ts';
import { runUpdate, type MicroBatch, type ScheduleConfig, type UpdateTarget } from '../training/update-loop.ts';
import type { MetricAccumulator } from '../training/metric-accumulator.ts';
import { DeviceMetricLog } from '../training/device-metric-log.ts';
import { checkFinite } from '../training/finite-guard.ts';
import { gatherResponseValuesGpu, scatterResponseValueGradsGpu } from '../../kernels/ppo/response-values.ts';
import { computeValueLossGpu } from '../../kernels/ppo/value-loss.ts';

export interface CriticUpdateConfig extends ScheduleConfig {
  cliprangeValue: number;
}

export class CriticUpdater {
  private readonly target: UpdateTarget;

  constructor(
    private readonly engine: Engine,
    private readonly critic: ValueModel,
    private readonly optimizer: AdamWOptimizer,
  ) {
    this.target = {
      optimizer,
      pool: new SequenceBufferPool(engine, critic.config.vocabSize),
      log: new DeviceMetricLog(engine, 'critic.metrics'),
      gradNormMetric: 'critic/grad_norm',
    };
  }

  async update(x: Experience, config: CriticUpdateConfig, rng: Rng): Promise<Record<string, number>> {
    if (!x.values) throw new Error('critic update: the experience has no values');
    const result = await runUpdate(x, config, rng, this.target, (micro, log, metrics) =>
      this.lossAndBackward(x, config, micro, log, metrics),
    );
    return { ...result, 'critic/lr': config.lr };
  }

  private async lossAndBackward(
    x: Experience,
    config: CriticUpdateConfig,
    { miniBatchRows, aggregation, rows, buffers: b, batch }: MicroBatch,
    log: DeviceMetricLog,
    metrics: MetricAccumulator,
  ): Promise<void> {
    const e = this.engine;
    const { S, R } = b;
    const m = rows.length;
    b.gatherResponse(b.oldValues, x.tensors.values);
    b.gatherResponse(b.returns, x.tensors.returns);
    const values = this.critic.tokenValues(batch, { saveForBackward: true });
    gatherResponseValuesGpu(e, values, b.vpreds, m, S, R);
    computeValueLossGpu(e, {
      vpreds: b.vpreds,
      returns: b.returns,
      values: b.oldValues,
      responseMask: b.responseMask,
      gradVpreds: b.gradVpreds,
      rowPartials: b.valuePartials,
      out: b.valueOut,
      cliprangeValue: config.cliprangeValue,
      aggregation,
      B: m,
      T: R,
    });
    scatterResponseValueGradsGpu(e, b.dValues, b.gradVpreds, m, S, R);
    this.critic.backward(b.dValues, this.optimizer.grads);
    log.record(b.valueOut, ([vfLoss, vfClipfrac, tokens]) => {
      checkFinite('critic/vf_loss', vfLoss);
      metrics.addSum(miniBatchRows, 'critic/vf_loss', vfLoss);
      metrics.addMean('critic/vf_clipfrac', vfClipfrac, tokens);
    });
  }
}
