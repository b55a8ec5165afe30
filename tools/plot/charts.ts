// Which charts a run gets and which verl metrics go on each. A metric the run never logged is left out, and a chart
// with no metric left is not drawn (no critic → no vf_loss; KL only when a KL term is enabled).
import { metricNames, series, type Point, type RunMetrics } from './metrics.ts';

export interface Series {
  key: string;
  label: string;
  color: string;
  points: Point[];
}

export interface ChartData {
  /** File stem of the chart's PNG. */
  id: string;
  title: string;
  yLabel: string;
  caption: string;
  series: Series[];
}

/** Okabe–Ito colours that keep ≥ 3:1 contrast on white, then near-black: distinguishable with colour-blindness. */
const PALETTE = ['#0072B2', '#D55E00', '#009E73', '#CC79A7', '#222222'];

interface ChartSpec {
  id: string;
  title: string;
  yLabel: string;
  caption: string;
  metrics: (run: RunMetrics) => { key: string; label: string }[];
}

// A data source's core validation metric: its reward's mean, or its acc's when the reward reports one (verl's choice).
const VAL_SOURCE = /^val-core\/(.+)\/(?:reward|acc)\/mean@\d+$/;

const CHARTS: ChartSpec[] = [
  {
    id: 'reward',
    title: 'Reward and validation accuracy',
    yLabel: 'score',
    caption:
      'Mean rule reward of the training rollouts (equal to accuracy for exact-match tasks) and mean score on the ' +
      'validation set.',
    metrics: (run) => {
      const sources = metricNames(run).filter((k) => VAL_SOURCE.test(k));
      return [
        { key: 'critic/score/mean', label: 'reward (critic/score/mean)' },
        { key: 'val/test_score/mean', label: 'validation (val/test_score/mean)' },
        // One source's score is the mean itself; several are worth telling apart.
        ...(sources.length > 1
          ? sources.map((key) => ({ key, label: `validation: ${VAL_SOURCE.exec(key)![1]}` }))
          : []),
      ];
    },
  },
  {
    id: 'kl',
    title: 'KL divergence',
    yLabel: 'KL (nats)',
    caption:
      'KL to the reference policy (as reward penalty or as loss term, whichever is enabled) and between the rollout ' +
      'policy and the updated policy.',
    metrics: () => [
      { key: 'actor/reward_kl_penalty', label: 'KL penalty in reward (actor/reward_kl_penalty)' },
      { key: 'actor/kl_loss', label: 'KL loss (actor/kl_loss)' },
      { key: 'actor/ppo_kl', label: 'policy update KL (actor/ppo_kl)' },
    ],
  },
  {
    id: 'entropy',
    title: 'Policy entropy',
    yLabel: 'nats per token',
    caption: 'Mean entropy of the policy over response tokens.',
    metrics: () => [{ key: 'actor/entropy', label: 'entropy (actor/entropy)' }],
  },
  {
    id: 'response_length',
    title: 'Response length',
    yLabel: 'tokens',
    caption: 'Mean number of generated tokens per response.',
    metrics: () => [{ key: 'response_length/mean', label: 'mean (response_length/mean)' }],
  },
  {
    id: 'search',
    title: 'Search tool use',
    yLabel: 'per response',
    caption:
      'Search-R1 runs (do_search): searches per response in the training rollouts and in greedy validation, and the ' +
      'share of responses that end in an answer.',
    metrics: () => [
      { key: 'env/number_of_valid_search', label: 'searches (env/number_of_valid_search)' },
      { key: 'val/env/number_of_valid_search', label: 'validation searches (val/env/number_of_valid_search)' },
      { key: 'env/finish_ratio', label: 'answered (env/finish_ratio)' },
    ],
  },
  {
    id: 'losses',
    title: 'Losses',
    yLabel: 'loss',
    caption: 'PPO clipped policy-gradient loss of the actor and value loss of the critic.',
    metrics: () => [
      { key: 'actor/pg_loss', label: 'policy (actor/pg_loss)' },
      { key: 'critic/vf_loss', label: 'value (critic/vf_loss)' },
    ],
  },
];

export function chartsWithData(run: RunMetrics): ChartData[] {
  return CHARTS.flatMap(({ metrics, ...chart }) => {
    const present = metrics(run)
      .map((m) => ({ ...m, points: series(run, m.key) }))
      .filter((m) => m.points.length > 0)
      .map((m, i) => ({ ...m, color: PALETTE[i % PALETTE.length] }));
    return present.length > 0 ? [{ ...chart, series: present }] : [];
  });
}
