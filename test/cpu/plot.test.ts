import { describe, it, expect, vi, beforeAll, afterAll } from 'vitest';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32 as zlibCrc32, inflateSync } from 'node:zlib';
import { parseMetrics, readRunMetrics, series } from '../../tools/plot/metrics.ts';
import { chartsWithData } from '../../tools/plot/charts.ts';
import { crc32, encodePng } from '../../tools/plot/png.ts';
import { plotRun, runPlot } from '../../tools/plot/cli.ts';

/** Decodes an 8-bit RGB, non-interlaced PNG, checking the signature, the chunk order and every chunk's CRC. */
function decodePng(bytes: Uint8Array): { width: number; height: number; rgb: Uint8Array } {
  expect([...bytes.subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const chunks: { type: string; data: Uint8Array }[] = [];
  for (let at = 8; at < bytes.length; ) {
    const length = view.getUint32(at);
    const typeAndData = bytes.subarray(at + 4, at + 8 + length);
    expect(view.getUint32(at + 8 + length)).toBe(zlibCrc32(typeAndData));
    chunks.push({ type: Buffer.from(typeAndData.subarray(0, 4)).toString('latin1'), data: typeAndData.subarray(4) });
    at += 12 + length;
  }
  expect(chunks.map((c) => c.type)).toEqual(['IHDR', 'IDAT', 'IEND']);
  const ihdr = new DataView(chunks[0].data.buffer, chunks[0].data.byteOffset, 13);
  const width = ihdr.getUint32(0);
  const height = ihdr.getUint32(4);
  expect([...chunks[0].data.subarray(8)]).toEqual([8, 2, 0, 0, 0]);
  const raw = inflateSync(chunks[1].data);
  const stride = width * 3;
  expect(raw.length).toBe((stride + 1) * height);
  const rgb = new Uint8Array(stride * height);
  for (let y = 0; y < height; y++) {
    expect(raw[y * (stride + 1)]).toBe(0);
    rgb.set(raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1)), y * stride);
  }
  return { width, height, rgb };
}

function countPixels(rgb: Uint8Array, hex: string): number {
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
  let count = 0;
  for (let i = 0; i < rgb.length; i += 3) if (rgb[i] === r && rgb[i + 1] === g && rgb[i + 2] === b) count++;
  return count;
}

/** A small run as the trainer writes it: validation before training and after the last step, no critic, no KL term. */
function syntheticRun(steps: number): string {
  const lines = [
    JSON.stringify({ 'training/global_step': 0, 'val/test_score/mean': 0.1, 'val-core/arithmetic/reward/mean@1': 0.1 }),
  ];
  for (let step = 1; step <= steps; step++) {
    lines.push(
      JSON.stringify({
        'training/global_step': step,
        'critic/score/mean': step / (steps + 1),
        'response_length/mean': 10 + step,
        'actor/pg_loss': step % 2 ? 0.01 * step : -0.02,
        'actor/entropy': step === 2 ? null : 1.5 - 0.1 * step,
        'actor/ppo_kl': 1e-4 * step,
        'timing_s/step': 2.5,
      }),
    );
  }
  lines.push(
    JSON.stringify({
      'training/global_step': steps,
      'val/test_score/mean': 0.6,
      'val-core/arithmetic/reward/mean@1': 0.6,
    }),
  );
  return `${lines.join('\n')}\n`;
}

describe('metrics.jsonl', () => {
  it('merges the lines of a step, later values winning, and skips nulls', () => {
    const text = `${syntheticRun(4) + JSON.stringify({ 'training/global_step': 2, 'actor/pg_loss': 7 })}\n\n`;
    const run = parseMetrics(text, 'm.jsonl');
    expect(run.steps.map((s) => s.step)).toEqual([0, 1, 2, 3, 4]);
    expect(series(run, 'val/test_score/mean')).toEqual([
      { step: 0, value: 0.1 },
      { step: 4, value: 0.6 },
    ]);
    expect(series(run, 'actor/pg_loss').map((p) => p.value)).toEqual([0.01, 7, 0.03, -0.02]);
    expect(series(run, 'actor/entropy').map((p) => p.step)).toEqual([1, 3, 4]);
    expect(run.steps[4].metrics.get('critic/score/mean')).toBe(0.8);
  });

  it('names the file and line of a bad line', () => {
    expect(() =>
      parseMetrics('{"training/global_step": 0}\n\n{"training/global_step": 1,\n', 'run/metrics.jsonl'),
    ).toThrow(/^run\/metrics\.jsonl:3: invalid JSON/);
    expect(() => parseMetrics('[1, 2]\n', 'm.jsonl')).toThrow(
      'm.jsonl:1: expected a JSON object of metrics, found an array',
    );
    expect(() => parseMetrics('{"critic/score/mean": 1}\n', 'm.jsonl')).toThrow(
      'm.jsonl:1: "training/global_step" is undefined, expected a non-negative integer',
    );
  });

  it('reports a missing run directory, metrics file or empty file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'plot-'));
    try {
      expect(() => readRunMetrics(join(dir, 'nope'))).toThrow(`run directory ${join(dir, 'nope')} not found`);
      expect(() => readRunMetrics(dir)).toThrow(`${join(dir, 'metrics.jsonl')} not found`);
      writeFileSync(join(dir, 'metrics.jsonl'), '\n');
      expect(() => readRunMetrics(dir)).toThrow(`${join(dir, 'metrics.jsonl')} has no metrics lines`);
    } finally {
      rmSync(dir, { recursive: true });
    }
  });
});

describe('PNG encoder', () => {
  it('computes the CRC-32 that zlib does', () => {
    expect(crc32(Buffer.from('123456789'))).toBe(0xcbf43926);
    const bytes = Uint8Array.from({ length: 1000 }, (_, i) => (i * 7919) & 0xff);
    expect(crc32(bytes)).toBe(zlibCrc32(bytes));
  });

  it('round-trips pixels through inflate', () => {
    const width = 7;
    const height = 3;
    const rgb = Uint8Array.from({ length: width * height * 3 }, (_, i) => (i * 37) & 0xff);
    const decoded = decodePng(encodePng(width, height, rgb));
    expect(decoded.width).toBe(width);
    expect(decoded.height).toBe(height);
    expect([...decoded.rgb]).toEqual([...rgb]);
  });

  it('rejects a buffer of the wrong size', () => {
    expect(() => encodePng(4, 4, new Uint8Array(47))).toThrow('encodePng: rgb has 47 bytes, expected 4x4x3 = 48');
  });
});

describe('node tools/plot.js RUN_DIR', () => {
  const STEPS = 5;
  let dir: string;
  let written: string[];
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'plot-'));
    writeFileSync(join(dir, 'metrics.jsonl'), syntheticRun(STEPS));
    written = plotRun(dir);
  });
  afterAll(() => rmSync(dir, { recursive: true }));

  it('writes a PNG for each chart with data and the page', () => {
    const charts = join(dir, 'charts');
    // No critic/vf_loss, but pg_loss keeps the losses chart; ppo_kl keeps the KL chart.
    expect(written).toEqual(
      ['reward', 'kl', 'entropy', 'response_length', 'losses']
        .map((c) => join(charts, `${c}.png`))
        .concat(join(charts, 'index.html')),
    );
    expect(written.every(existsSync)).toBe(true);
  });

  it('draws each series in its colour', () => {
    const png = decodePng(readFileSync(join(dir, 'charts', 'reward.png')));
    expect([png.width, png.height]).toEqual([800, 500]);
    expect(countPixels(png.rgb, '#0072b2')).toBeGreaterThan(200);
    expect(countPixels(png.rgb, '#d55e00')).toBeGreaterThan(200);
    expect(countPixels(png.rgb, '#009e73')).toBe(0);
  });

  it('puts an accessible SVG per chart on the page, with every point, and the last step in the table', () => {
    const html = readFileSync(join(dir, 'charts', 'index.html'), 'utf8');
    expect(html).not.toMatch(/<(script|link)\b|src=|url\(/);
    expect(html.match(/<figure /g)).toHaveLength(5);
    expect(html.match(/<figcaption>/g)).toHaveLength(5);
    expect(html.match(/<svg [^>]*role="img" aria-labelledby="chart-\w+-title chart-\w+-desc"/g)).toHaveLength(5);
    const points = (key: string) =>
      html.match(new RegExp(`data-series="${key}" points="([^"]*)"`))?.[1].split(' ').length;
    expect(points('critic/score/mean')).toBe(STEPS);
    expect(points('val/test_score/mean')).toBe(2);
    expect(points('actor/entropy')).toBe(STEPS - 1);
    expect(html).not.toContain('data-series="val-core/arithmetic/reward/mean@1"');
    expect(html).toContain('<caption>Metrics at step 5</caption>');
    expect(html).toContain('<tr><th scope="row">val/test_score/mean</th><td class="value">0.6</td></tr>');
  });

  it('a search run gets the search chart: training and validation searches, answers', () => {
    const run = parseMetrics(
      [
        { 'training/global_step': 0, 'val/test_score/mean': 0.1, 'val/env/number_of_valid_search': 0 },
        {
          'training/global_step': 1,
          'critic/score/mean': 0.4,
          'env/number_of_valid_search': 0.4,
          'env/finish_ratio': 1,
        },
        {
          'training/global_step': 2,
          'critic/score/mean': 0.8,
          'env/number_of_valid_search': 0.8,
          'env/finish_ratio': 0.9,
        },
        { 'training/global_step': 2, 'val/test_score/mean': 1, 'val/env/number_of_valid_search': 1 },
      ]
        .map((m) => JSON.stringify(m))
        .join('\n'),
      'search.jsonl',
    );
    const search = chartsWithData(run).find((c) => c.id === 'search')!;
    expect(search.series.map((s) => [s.key, s.points.length])).toEqual([
      ['env/number_of_valid_search', 2],
      ['val/env/number_of_valid_search', 2],
      ['env/finish_ratio', 2],
    ]);
    expect(chartsWithData(parseMetrics(syntheticRun(3), 'plain.jsonl')).some((c) => c.id === 'search')).toBe(false);
  });

  it('prints a one-line error for bad input and usage for no argument', () => {
    const error = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      const bad = join(dir, 'bad');
      mkdirSync(bad);
      writeFileSync(join(bad, 'metrics.jsonl'), '{"training/global_step": 1}\nnot json\n');
      expect(runPlot([bad])).toBe(1);
      expect(error).toHaveBeenLastCalledWith(
        expect.stringMatching(new RegExp(`^plot: ${join(bad, 'metrics.jsonl')}:2: invalid JSON`)),
      );
      expect(runPlot([])).toBe(2);
      expect(error).toHaveBeenLastCalledWith(expect.stringMatching(/^usage: node tools\/plot\.js RUN_DIR/));
    } finally {
      error.mockRestore();
    }
  });
});
