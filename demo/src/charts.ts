// Live training curves (uPlot: small, canvas-based, fast to redraw each step). One chart per quantity a PPO
// user watches; x is the PPO step. Validation accuracy exists only every few steps, so its series spans gaps.
// Each figure carries data-points (steps with a finite value) for the browser test and assistive tech.
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

interface SeriesSpec {
  label: string;
  /** verl metric name. */
  key: string;
  color: string;
  dash?: number[];
}

interface ChartSpec {
  title: string;
  series: SeriesSpec[];
}

// Okabe–Ito colours: distinguishable with the common colour-vision deficiencies.
const CHARTS: ChartSpec[] = [
  {
    title: 'Reward and accuracy',
    series: [
      { label: 'mean reward (train samples)', key: 'critic/score/mean', color: '#0072B2' },
      { label: 'validation accuracy (greedy)', key: 'val/test_score/mean', color: '#D55E00', dash: [6, 4] },
    ],
  },
  {
    title: 'KL',
    series: [
      { label: 'KL to reference (in reward)', key: 'actor/reward_kl_penalty', color: '#009E73' },
      { label: 'KL old → new policy', key: 'actor/ppo_kl', color: '#CC79A7', dash: [6, 4] },
    ],
  },
  { title: 'Entropy', series: [{ label: 'policy entropy', key: 'actor/entropy', color: '#E69F00' }] },
  { title: 'Response length', series: [{ label: 'mean tokens', key: 'response_length/mean', color: '#56B4E9' }] },
  {
    title: 'Losses',
    series: [
      { label: 'policy loss', key: 'actor/pg_loss', color: '#0072B2' },
      { label: 'value loss', key: 'critic/vf_loss', color: '#D55E00', dash: [6, 4] },
    ],
  },
];

const HEIGHT = 180;

class Chart {
  private readonly steps: number[] = [];
  private readonly values: (number | null)[][];
  private readonly plot: uPlot;

  constructor(private readonly spec: ChartSpec, private readonly figure: HTMLElement, width: number) {
    this.values = spec.series.map(() => []);
    const body = document.createElement('div');
    figure.append(body);
    this.plot = new uPlot({
      width,
      height: HEIGHT,
      scales: { x: { time: false } },
      // Steps are whole numbers: no tick at 1.5.
      axes: [{ label: 'PPO step', incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] }, {}],
      legend: { live: false },
      series: [
        { label: 'step' },
        ...spec.series.map((s) => ({ label: s.label, stroke: s.color, dash: s.dash, width: 2, spanGaps: true, points: { size: 5 } })),
      ],
    }, [[], ...spec.series.map(() => [])], body);
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
  private charts: Chart[] = [];

  constructor(private readonly container: HTMLElement) {
    this.reset();
    new ResizeObserver(() => this.charts.forEach((c) => c.resize(this.chartWidth()))).observe(container);
  }

  reset(): void {
    this.container.replaceChildren();
    this.charts = CHARTS.map((spec) => {
      const figure = document.createElement('figure');
      figure.className = 'chart';
      const caption = document.createElement('figcaption');
      caption.textContent = spec.title;
      figure.append(caption);
      figure.setAttribute('aria-label', `${spec.title}: ${spec.series.map((s) => s.label).join(', ')} per PPO step`);
      this.container.append(figure);
      return new Chart(spec, figure, this.chartWidth());
    });
  }

  record(step: number, metrics: Record<string, number>): void {
    for (const chart of this.charts) chart.record(step, metrics);
  }

  private chartWidth(): number {
    const columns = this.container.clientWidth > 900 ? 2 : 1;
    return Math.max(280, Math.floor(this.container.clientWidth / columns) - 24);
  }
}
