// Live training curves (uPlot: small, canvas-based, fast to redraw each step). One chart per quantity a PPO
// user watches, x the PPO step, plus the warm start's loss per step. Validation accuracy exists only every few
// steps, so its series spans gaps. Hovering shows each series' value at that step in the legend. Each figure
// carries data-points (steps with a finite value) for the browser test and assistive tech.
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { formatValue } from './format-value.ts';

interface SeriesSpec {
  label: string;
  /** verl metric name. */
  key: string;
  color: string;
  dash?: number[];
}

interface ChartSpec {
  title: string;
  x: string;
  series: SeriesSpec[];
  /** A fixed y range (scores and accuracies live in [0, 1]); otherwise the data's. */
  range?: [number, number];
}

/** The warm start's loss, recorded under this key per warm-start step. */
const WARM_START_LOSS = 'warm_start/loss';

// Okabe–Ito colours: distinguishable with the common colour-vision deficiencies.
const WARM_START_CHART: ChartSpec = {
  title: 'Warm-start loss',
  x: 'warm-start step',
  series: [{ label: 'cross-entropy (response tokens)', key: WARM_START_LOSS, color: '#0072B2' }],
};

const PPO_CHARTS: ChartSpec[] = [
  {
    title: 'Reward and accuracy',
    x: 'PPO step',
    range: [0, 1],
    series: [
      { label: 'mean reward (train samples)', key: 'critic/score/mean', color: '#0072B2' },
      { label: 'validation accuracy (greedy)', key: 'val/test_score/mean', color: '#D55E00', dash: [6, 4] },
    ],
  },
  {
    title: 'KL',
    x: 'PPO step',
    series: [
      { label: 'KL to reference (in reward)', key: 'actor/reward_kl_penalty', color: '#009E73' },
      { label: 'KL old → new policy', key: 'actor/ppo_kl', color: '#CC79A7', dash: [6, 4] },
    ],
  },
  { title: 'Entropy', x: 'PPO step', series: [{ label: 'policy entropy', key: 'actor/entropy', color: '#E69F00' }] },
  {
    title: 'Response length',
    x: 'PPO step',
    series: [{ label: 'mean tokens', key: 'response_length/mean', color: '#56B4E9' }],
  },
  {
    title: 'Losses',
    x: 'PPO step',
    series: [
      { label: 'policy loss', key: 'actor/pg_loss', color: '#0072B2' },
      { label: 'value loss', key: 'critic/vf_loss', color: '#D55E00', dash: [6, 4] },
    ],
  },
];

const HEIGHT = 180;

/**
 * A y axis wide enough for its longest label: uPlot's fixed default width cut the left of "-0.0005", and with it
 * the minus sign (uPlot's axis-autosize recipe).
 */
function yAxisSize(u: uPlot, values: string[] | null, axisIdx: number, cycleNum: number): number {
  const axis = u.axes[axisIdx] as uPlot.Axis & { _size: number; font: [string, number]; ticks: { size: number } };
  if (cycleNum > 1) return axis._size;
  const longest = (values ?? []).reduce((a, b) => (b.length > a.length ? b : a), '');
  u.ctx.font = axis.font[0];
  return Math.ceil(axis.ticks.size + (axis.gap ?? 5) + u.ctx.measureText(longest).width / devicePixelRatio);
}

/** The data's range padded a little; a flat series gets a small band around its value (uPlot's default is 0–100). */
function dataRange(_u: uPlot, min: number | null, max: number | null): uPlot.Range.MinMax {
  if (min === null || max === null) return [0, 1];
  const pad = max > min ? (max - min) * 0.05 : Math.abs(min) * 0.1 || 1e-3;
  return [min - pad, max + pad];
}

class Chart {
  private readonly steps: number[] = [];
  private readonly values: (number | null)[][];
  private readonly plot: uPlot;

  constructor(
    private readonly spec: ChartSpec,
    private readonly figure: HTMLElement,
    width: number,
  ) {
    this.values = spec.series.map(() => []);
    const body = document.createElement('div');
    figure.append(body);
    const range = spec.range;
    this.plot = new uPlot(
      {
        width,
        height: HEIGHT,
        scales: { x: { time: false }, y: { range: range ? () => range : dataRange } },
        axes: [
          // Steps are whole numbers: no tick at 1.5.
          { label: spec.x, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] },
          { size: yAxisSize, values: (_u, splits) => splits.map(formatValue) },
        ],
        legend: { live: true },
        series: [
          { label: spec.x, value: (_u, v) => (v === null ? '–' : String(v)) },
          ...spec.series.map((s) => ({
            label: s.label,
            stroke: s.color,
            dash: s.dash,
            width: 2,
            spanGaps: true,
            points: { size: 5 },
            value: (_u: uPlot, v: number | null) => (v === null ? '–' : formatValue(v)),
          })),
        ],
      },
      [[], ...spec.series.map(() => [])],
      body,
    );
    this.figure.dataset.points = '0';
  }

  /** Adds or updates the values at `step` from whichever of this chart's metrics are present. */
  record(step: number, metrics: Record<string, number>): void {
    if (!this.spec.series.some((s) => Number.isFinite(metrics[s.key]))) return;
    let at = this.steps.indexOf(step);
    if (at < 0) {
      at = this.steps.push(step) - 1;
      this.values.forEach((v) => v.push(null));
    }
    this.spec.series.forEach((s, i) => {
      if (Number.isFinite(metrics[s.key])) this.values[i][at] = metrics[s.key];
    });
    this.plot.setData([this.steps, ...this.values] as uPlot.AlignedData);
    this.figure.dataset.points = String(this.steps.length);
  }

  resize(width: number): void {
    this.plot.setSize({ width, height: HEIGHT });
  }
}

export class MetricCharts {
  private warmStart!: Chart;
  private ppo: Chart[] = [];

  constructor(private readonly container: HTMLElement) {
    this.reset();
    new ResizeObserver(() => [this.warmStart, ...this.ppo].forEach((c) => c.resize(this.chartWidth()))).observe(
      container,
    );
  }

  reset(): void {
    this.container.replaceChildren();
    [this.warmStart, ...this.ppo] = [WARM_START_CHART, ...PPO_CHARTS].map((spec) => {
      const figure = document.createElement('figure');
      figure.className = 'chart';
      figure.dataset.chart = spec.title;
      const caption = document.createElement('figcaption');
      caption.textContent = spec.title;
      figure.append(caption);
      figure.setAttribute('aria-label', `${spec.title}: ${spec.series.map((s) => s.label).join(', ')} per ${spec.x}`);
      this.container.append(figure);
      return new Chart(spec, figure, this.chartWidth());
    });
  }

  /** One PPO step's metrics, or a validation's. */
  record(step: number, metrics: Record<string, number>): void {
    for (const chart of this.ppo) chart.record(step, metrics);
  }

  recordWarmStart(step: number, loss: number): void {
    this.warmStart.record(step, { [WARM_START_LOSS]: loss });
  }

  private chartWidth(): number {
    const columns = this.container.clientWidth > 900 ? 2 : 1;
    return Math.max(280, Math.floor(this.container.clientWidth / columns) - 24);
  }
}
