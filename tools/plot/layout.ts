// Lays out one line chart as a resolution-independent scene (lines, polylines, dots, text) that both the PNG
// rasteriser and the SVG writer draw, so the two outputs show the same chart.
import type { ChartData } from './charts.ts';
import { GLYPH_ADVANCE, GLYPH_HEIGHT } from './font.ts';

export type Anchor = 'start' | 'middle' | 'end';

export type Shape =
  | { kind: 'line'; x1: number; y1: number; x2: number; y2: number; color: string; width: number }
  | { kind: 'polyline'; series: string; points: [number, number][]; color: string; width: number }
  | { kind: 'dot'; x: number; y: number; radius: number; color: string }
  /** (x, y) is the anchor point at the vertical middle of capital letters; vertical text reads bottom to top. */
  | {
      kind: 'text';
      x: number;
      y: number;
      text: string;
      size: number;
      color: string;
      anchor: Anchor;
      vertical?: boolean;
    };

export interface Scene {
  width: number;
  height: number;
  title: string;
  /** Plain-text summary of the data, for screen readers. */
  description: string;
  shapes: Shape[];
}

const TEXT = '#222222';
const AXIS = '#555555';
const GRID = '#e4e4e4';
const TITLE_SIZE = 24;
const LABEL_SIZE = 16;
const LINE_WIDTH = 2.5;
/** Series with at most this many points get a dot per point: with few steps, each one is worth seeing. */
const MAX_DOTTED_POINTS = 30;

/** Width of a string in the bitmap font at `size` px (an upper bound for the SVG's proportional font). */
export function textWidth(text: string, size: number): number {
  return (text.length * GLYPH_ADVANCE * size) / GLYPH_HEIGHT;
}

interface Axis {
  min: number;
  max: number;
  ticks: number[];
  labels: string[];
}

/** 1, 2 or 5 times a power of ten, close to `raw`. */
function niceStep(raw: number): number {
  const power = 10 ** Math.floor(Math.log10(raw));
  const f = raw / power;
  return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * power;
}

function tickLabel(value: number, step: number, largest: number): string {
  if (value === 0) return '0';
  if (step >= 1e-4 && largest < 1e6) return value.toFixed(Math.max(0, -Math.floor(Math.log10(step))));
  const digits = Math.max(1, Math.floor(Math.log10(largest)) - Math.floor(Math.log10(step)) + 1);
  return Number(value.toPrecision(digits)).toExponential();
}

/** Axis covering [lo, hi] that starts and ends on a tick, about `target` ticks; integer ticks for step counts. */
function niceAxis(lo: number, hi: number, target: number, integer: boolean): Axis {
  if (lo === hi) {
    const pad = integer ? 1 : Math.abs(lo) / 10 || 1;
    lo -= pad;
    hi += pad;
  }
  let step = niceStep((hi - lo) / target);
  if (integer) step = Math.max(1, step);
  const first = Math.floor(lo / step);
  const count = Math.ceil(hi / step) - first;
  // toPrecision drops the binary noise of k·step (0.30000000000000004) that would otherwise leak into labels.
  const ticks = Array.from({ length: count + 1 }, (_, i) => Number(((first + i) * step).toPrecision(12)));
  const largest = Math.max(...ticks.map(Math.abs));
  return { min: ticks[0], max: ticks[count], ticks, labels: ticks.map((t) => tickLabel(t, step, largest)) };
}

function extent(values: number[]): [number, number] {
  return values.reduce(([lo, hi], v) => [Math.min(lo, v), Math.max(hi, v)], [Infinity, -Infinity]);
}

/** Hairlines sit on pixel centres so they stay one pixel wide, not two half-covered ones. */
function crisp(v: number): number {
  return Math.floor(v) + 0.5;
}

function describe(chart: ChartData): string {
  const fmt = (v: number) => Number(v.toPrecision(4)).toString();
  return chart.series
    .map(({ label, points }) => {
      const first = points[0];
      const last = points[points.length - 1];
      return (
        `${label}: ${points.length} point${points.length === 1 ? '' : 's'}, ${fmt(first.value)} at step ${first.step}` +
        (points.length > 1 ? ` to ${fmt(last.value)} at step ${last.step}` : '')
      );
    })
    .join('; ');
}

export function layoutChart(chart: ChartData, width = 800, height = 500): Scene {
  const shapes: Shape[] = [];
  const text = (x: number, y: number, s: string, size: number, anchor: Anchor, vertical = false) =>
    shapes.push({ kind: 'text', x, y, text: s, size, color: TEXT, anchor, vertical });

  text(width / 2, 24, chart.title, TITLE_SIZE, 'middle');

  const points = chart.series.flatMap((s) => s.points);
  const xAxis = niceAxis(...extent(points.map((p) => p.step)), 8, true);
  const yAxis = niceAxis(...extent(points.map((p) => p.value)), 6, false);

  const tickWidth = Math.max(...yAxis.labels.map((l) => textWidth(l, LABEL_SIZE)));
  const left = Math.round(LABEL_SIZE + 16 + tickWidth + 10);
  const right = width - 24;

  // Legend: entries flow left to right from the plot's left edge, wrapping before the right edge.
  const swatch = 24;
  const rowHeight = LABEL_SIZE + 8;
  let x = left;
  let y = 56;
  for (const s of chart.series) {
    const entryWidth = swatch + 10 + textWidth(s.label, LABEL_SIZE);
    if (x > left && x + entryWidth > right) {
      x = left;
      y += rowHeight;
    }
    shapes.push({ kind: 'line', x1: x, y1: y, x2: x + swatch, y2: y, color: s.color, width: LINE_WIDTH + 1 });
    text(x + swatch + 10, y, s.label, LABEL_SIZE, 'start');
    x += entryWidth + 24;
  }

  const top = y + rowHeight;
  const bottom = height - 66;
  const px = (step: number) => left + ((step - xAxis.min) / (xAxis.max - xAxis.min)) * (right - left);
  const py = (value: number) => bottom - ((value - yAxis.min) / (yAxis.max - yAxis.min)) * (bottom - top);

  yAxis.ticks.forEach((t, i) => {
    const ty = crisp(py(t));
    shapes.push({ kind: 'line', x1: left, y1: ty, x2: right, y2: ty, color: GRID, width: 1 });
    shapes.push({ kind: 'line', x1: left - 6, y1: ty, x2: left, y2: ty, color: AXIS, width: 1 });
    text(left - 10, ty, yAxis.labels[i], LABEL_SIZE, 'end');
  });
  // A long run would crowd the step labels; keep every k-th so each has room.
  const labelEvery = Math.ceil(
    (xAxis.ticks.length * (Math.max(...xAxis.labels.map((l) => textWidth(l, LABEL_SIZE))) + 16)) / (right - left),
  );
  xAxis.ticks.forEach((t, i) => {
    const tx = crisp(px(t));
    shapes.push({ kind: 'line', x1: tx, y1: bottom, x2: tx, y2: bottom + 6, color: AXIS, width: 1 });
    if (i % labelEvery === 0) text(tx, bottom + 20, xAxis.labels[i], LABEL_SIZE, 'middle');
  });
  shapes.push({ kind: 'line', x1: crisp(left), y1: top, x2: crisp(left), y2: bottom, color: AXIS, width: 1 });
  shapes.push({ kind: 'line', x1: left, y1: crisp(bottom), x2: right, y2: crisp(bottom), color: AXIS, width: 1 });
  text((left + right) / 2, height - 22, 'training step', LABEL_SIZE, 'middle');
  text(18, (top + bottom) / 2, chart.yLabel, LABEL_SIZE, 'middle', true);

  for (const s of chart.series) {
    const coords = s.points.map((p): [number, number] => [px(p.step), py(p.value)]);
    shapes.push({ kind: 'polyline', series: s.key, points: coords, color: s.color, width: LINE_WIDTH });
    if (coords.length <= MAX_DOTTED_POINTS)
      for (const [cx, cy] of coords) shapes.push({ kind: 'dot', x: cx, y: cy, radius: 4, color: s.color });
  }

  return { width, height, title: chart.title, description: describe(chart), shapes };
}
