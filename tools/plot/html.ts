// The run's chart page: one self-contained HTML file (inline SVG and CSS, nothing fetched) with every chart and a
// table of the last step's metrics.
import type { ChartData } from './charts.ts';
import type { Scene } from './layout.ts';
import type { StepRecord } from './metrics.ts';
import { escapeXml, sceneToSvg } from './svg.ts';

const STYLE = `
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; color: #222; background: #fff; margin: 2rem auto; max-width: 840px; padding: 0 1rem; line-height: 1.4; }
h1 { font-size: 1.5rem; }
figure { margin: 0 0 2.5rem; }
figure svg { width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { margin-top: 0.4rem; color: #444; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; margin-bottom: 0.4rem; }
th, td { padding: 0.2rem 0.8rem; border-bottom: 1px solid #ddd; text-align: left; }
td.value { text-align: right; font-family: ui-monospace, monospace; }
`;

function formatValue(v: number): string {
  return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(6)));
}

export function renderPage(a: {
  title: string;
  source: string;
  charts: { chart: ChartData; scene: Scene }[];
  last: StepRecord;
}): string {
  const figures = a.charts.map(
    ({ chart, scene }) =>
      `<figure id="${chart.id}">\n${sceneToSvg(scene, `chart-${chart.id}`)}\n<figcaption>${escapeXml(chart.caption)}</figcaption>\n</figure>`,
  );
  const rows = [...a.last.metrics].map(
    ([key, value]) => `<tr><th scope="row">${escapeXml(key)}</th><td class="value">${formatValue(value)}</td></tr>`,
  );
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeXml(a.title)}</title>
<style>${STYLE}</style>
</head>
<body>
<main>
<h1>${escapeXml(a.title)}</h1>
<p>From <code>${escapeXml(a.source)}</code>.</p>
${figures.join('\n')}
<table>
<caption>Metrics at step ${a.last.step}</caption>
<thead><tr><th scope="col">metric</th><th scope="col">value</th></tr></thead>
<tbody>
${rows.join('\n')}
</tbody>
</table>
</main>
</body>
</html>
`;
}
