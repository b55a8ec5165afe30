// Whether the step needs a critic, and what it does with it: GAE needs values; the others need none.
// critic.freeze: values are still computed (GAE needs them) but nothing trains: no optimizer state, no update,
// and no critic/vf_loss metric that would read as if the critic had learned.
import { estimatorUsesCritic } from '../config/advantage-estimator-table.ts';

export interface CriticPlan {
  /** Run the critic forward to get values for GAE. */
  computeValues: boolean;
  /** Allocate AdamW moments for the critic's parameters. */
  allocateOptimizerState: boolean;
  /** Run the critic's loss, backward and optimizer step. */
  update: boolean;
}

export function planCritic(config: { advEstimator: string; freeze: boolean }): CriticPlan {
  const computeValues = estimatorUsesCritic(config.advEstimator);
  if (!computeValues && config.freeze)
    throw new Error(`critic.freeze is set but algorithm.adv_estimator=${config.advEstimator} uses no critic`);
  const trains = computeValues && !config.freeze;
  return { computeValues, allocateOptimizerState: trains, update: trains };
}

/** The critic metrics of one step: the update's metrics (critic/vf_loss, …) when it trained, a frozen marker when
 *  it only computed values, none without a critic. */
export function criticMetrics(plan: CriticPlan, update: Record<string, number> | null): Record<string, number> {
  if (!plan.update) {
    if (update) throw new Error('critic metrics: the critic is frozen but an update result was given');
    return plan.computeValues ? { 'critic/frozen': 1 } : {};
  }
  if (!update) throw new Error('critic metrics: the critic trains this step but no update result was given');
  return { ...update };
}
