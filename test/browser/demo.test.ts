// The browser demo end to end in a real browser, as a new user meets it: builds demo/, serves demo/dist on loopback,
// drives Debian's headless Chromium (WebGPU on SwiftShader) from the shipped checkpoint through PPO_STEPS steps of
// the page's default settings, and checks what a person looks for: validation accuracy well above the
// checkpoint's, the trailing spaces PPO removes visible in the answers, every chart drawn, the command line. Saves
// a screenshot and the measured figures to test-artifacts/, then downloads the metrics log and the models and opens
// the models as Hugging Face directories with the Node loaders.
// A missing chromium fails with the setup hint; it never skips.
import { createReadStream, existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, extname, join, normalize, resolve } from 'node:path';
import { unzipSync } from 'fflate';
import { chromium, type Browser, type Page } from 'playwright-core';
import { build } from 'vite';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { openHfCheckpoint } from '../../models/checkpoint-io-node.ts';
import { loadTokenizer } from '../../models/tokenizer-node.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const DIST = join(ROOT, 'demo/dist');
const ARTIFACTS = join(ROOT, 'test-artifacts');
const CHROMIUM = '/usr/bin/chromium';
// Closed network: no update checks, sync or first-run fetches. --no-sandbox because CI runs as root.
const CHROMIUM_FLAGS = [
  '--enable-unsafe-webgpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--no-sandbox',
];
// The page's own settings but the number of steps: enough for the gain to show on SwiftShader.
const PPO_STEPS = 5;
const RUN_SETTINGS = { steps: String(PPO_STEPS) };
/** Validation accuracy gained over the checkpoint's, on the page's 64 held-out prompts. */
const MIN_GAIN = 0.25;
/** A live warm start, kept short: it only has to show that path works. */
const LIVE_SETTINGS = { warmStartSteps: '10', batchSize: '8', steps: '1' };
const RUN_TIMEOUT_MS = 480_000;
/** Under the GPU class: the shipped checkpoint, a few steps (the GPU variants are slower on SwiftShader's CPU). */
const GPU_CLASS_SETTINGS = { steps: '2', batchSize: '8' };

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html',
  '.js': 'text/javascript',
  '.css': 'text/css',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.json': 'application/json',
};

function serveStatic(dir: string): Promise<Server> {
  const server = createServer(async (req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname)).replace(
      /^(\.\.[/\\])+/,
      '',
    );
    const file = join(dir, path.endsWith('/') ? `${path}index.html` : path);
    const found =
      file.startsWith(dir) &&
      (await stat(file).then(
        (s) => s.isFile(),
        () => false,
      ));
    if (!found) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': CONTENT_TYPES[extname(file)] ?? 'application/octet-stream' });
    createReadStream(file).pipe(res);
  });
  return new Promise((done) => server.listen(0, '127.0.0.1', () => done(server)));
}

let server: Server;
let browser: Browser;

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(
      `${CHROMIUM} is missing: run \`bash tools/setup.sh\` (it installs Debian's chromium for this test)`,
    );
  await build({ configFile: join(ROOT, 'demo/vite.config.ts'), logLevel: 'warn' });
  server = await serveStatic(DIST);
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_FLAGS });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await new Promise((done) => server?.close(done));
});

const text = (page: Page, testId: string) => page.getByTestId(testId).innerText();

/** Unpacks the demo's zip into a temporary directory; returns the directory holding actor/ and critic/. */
async function unpackModels(zip: Uint8Array): Promise<{ root: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'demo-models-'));
  const entries = Object.entries(unzipSync(zip));
  for (const [name, data] of entries) {
    if (name.endsWith('/')) continue;
    await mkdir(dirname(join(dir, name)), { recursive: true });
    await writeFile(join(dir, name), data);
  }
  const root = join(dir, entries[0][0].split('/')[0]);
  return { root, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** The metrics.jsonl the page offers: PPO step lines and validation lines, as `node train.js` writes them. */
async function downloadMetrics(page: Page): Promise<Record<string, number>[]> {
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download-metrics')]);
  const text = await readFile(await download.path(), 'utf8');
  return text
    .trimEnd()
    .split('\n')
    .map((line) => JSON.parse(line));
}

const stepOf = (page: Page) => page.evaluate(() => Number(document.querySelector('[data-testid=step]')!.textContent));
const chartPoints = (page: Page, chart: string) =>
  page.locator(`figure[data-chart="${chart}"]`).getAttribute('data-points').then(Number);

/** The page on SwiftShader, ready to start (the shipped checkpoint fetched); errors it logs collect in the array.
 *  `query`: the page's URL query (engine knobs, e.g. WEBGPU_DEVICE_CLASS=gpu). */
async function openDemo(query = ''): Promise<{ page: Page; pageErrors: string[] }> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1100 } });
  const pageErrors: string[] = [];
  page.on('pageerror', (err) => pageErrors.push(err.message));
  page.on('console', (msg) => msg.type() === 'error' && pageErrors.push(msg.text()));
  await page.goto(`http://127.0.0.1:${(server.address() as AddressInfo).port}/${query}`);
  await expect.poll(() => page.locator('#device').innerText(), { timeout: 60_000 }).toMatch(/swiftshader/i);
  await page.waitForFunction(() => !(document.getElementById('start') as HTMLButtonElement).disabled, null, {
    timeout: 60_000,
  });
  return { page, pageErrors };
}

test(
  'from the shipped checkpoint, PPO raises validation accuracy within a few steps in headless Chromium',
  async () => {
    const { page, pageErrors } = await openDemo();
    // SwiftShader is a CPU device: without a query the page chooses the CPU variants.
    expect(await text(page, 'device-class')).toBe('cpu');
    // The shipped checkpoint is the default start, and its warm start is charted before any training.
    expect(await page.inputValue('select[name=startFrom]')).toBe('checkpoint');
    expect(await chartPoints(page, 'Warm-start loss')).toBeGreaterThanOrEqual(100);
    for (const [name, value] of Object.entries(RUN_SETTINGS)) await page.fill(`input[name=${name}]`, value);
    const command = await page.locator('#command').innerText();
    expect(command).toContain('node train.js ');
    expect(command).toContain('actor_rollout_ref.model.path=demo/public/warm-start');
    expect(command).toContain(`trainer.total_training_steps=${PPO_STEPS}`);
    await page.click('#start');

    // Before the first PPO step the table shows the checkpoint's answers, their trailing spaces drawn as ␣.
    await page.waitForFunction(
      () => document.getElementById('samples-note')!.textContent!.includes('after 0 PPO steps'),
      null,
      { timeout: 120_000, polling: 100 },
    );
    const startAnswers = await page.locator('#samples tbody td:nth-child(2)').allInnerTexts();
    expect(startAnswers.filter((a) => a.endsWith('\u2423')).length).toBeGreaterThan(startAnswers.length / 2);

    // The last step is followed by a validation: accuracy is final once the run says done.
    await expect.poll(() => page.locator('#phase').innerText(), { timeout: RUN_TIMEOUT_MS }).toBe('done');
    expect(await stepOf(page)).toBe(PPO_STEPS);
    expect(pageErrors).toEqual([]);

    const metrics = await downloadMetrics(page);
    const validation = metrics.filter((m) => 'val/test_score/mean' in m);
    const accuracyAt = (step: number) =>
      validation.find((m) => m['training/global_step'] === step)!['val/test_score/mean'];
    const before = accuracyAt(0);
    const after = accuracyAt(PPO_STEPS);
    // What a person looks for: the model got better at the task, by a margin no sampling noise gives.
    expect(after).toBeGreaterThanOrEqual(before + MIN_GAIN);
    expect(Number(await text(page, 'start-accuracy'))).toBeCloseTo(before, 3);
    expect(Number(await text(page, 'accuracy'))).toBeCloseTo(after, 3);
    const steps = metrics.filter((m) => 'critic/score/mean' in m);
    expect(steps.map((m) => m['training/global_step'])).toEqual(Array.from({ length: PPO_STEPS }, (_, i) => i + 1));
    const secondsPerStep = steps.reduce((sum, m) => sum + m['timing_s/step'], 0) / steps.length;
    const charts = await page
      .locator('figure.chart')
      .evaluateAll((figures) =>
        figures.map((f) => [(f as HTMLElement).dataset.chart, Number((f as HTMLElement).dataset.points)]),
      );
    expect(charts.length).toBe(6);
    for (const [chart, points] of charts) expect(points, String(chart)).toBeGreaterThanOrEqual(PPO_STEPS);

    await mkdir(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'demo.png'), fullPage: true });
    const figures = {
      before,
      after,
      steps: PPO_STEPS,
      secondsPerStep,
      settings: RUN_SETTINGS,
      validation: validation.map((m) => [m['training/global_step'], m['val/test_score/mean']]),
    };
    await writeFile(join(ARTIFACTS, 'demo.json'), `${JSON.stringify(figures, null, 2)}\n`);
    console.log(
      `browser demo: validation accuracy ${before.toFixed(3)} -> ${after.toFixed(3)} in ${PPO_STEPS} PPO steps, ` +
        `${secondsPerStep.toFixed(1)} s per step`,
    );

    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download')]);
    const models = await unpackModels(new Uint8Array(await readFile(await download.path())));
    try {
      const heads = { actor: 'causal-lm', critic: 'token-classification' } as const;
      for (const [dir, head] of Object.entries(heads)) {
        const checkpoint = await openHfCheckpoint(join(models.root, dir));
        await checkpoint.tensors.close();
        expect(checkpoint.config.head).toBe(head);
        const tokenizer = await loadTokenizer(join(models.root, dir), 'native');
        expect(await tokenizer.decode(await tokenizer.encode('37+58=', { addSpecialTokens: false }))).toBe('37+58=');
      }
    } finally {
      await models.cleanup();
    }
  },
  RUN_TIMEOUT_MS + 180_000,
);

test(
  'the warm start can still run live in the tab, charted step by step',
  async () => {
    const { page, pageErrors } = await openDemo();
    await page.selectOption('select[name=startFrom]', 'live');
    for (const [name, value] of Object.entries(LIVE_SETTINGS)) await page.fill(`input[name=${name}]`, value);
    expect(await page.locator('#command').innerText()).not.toContain('actor_rollout_ref.model.path');
    expect(await page.locator('#command-differences').innerText()).toContain(
      `live warm start has ${LIVE_SETTINGS.warmStartSteps} steps`,
    );
    await page.click('#start');
    await expect.poll(() => page.locator('#phase').innerText(), { timeout: RUN_TIMEOUT_MS }).toBe('done');
    expect(await chartPoints(page, 'Warm-start loss')).toBe(Number(LIVE_SETTINGS.warmStartSteps));
    expect(await stepOf(page)).toBe(1);
    expect(pageErrors).toEqual([]);
  },
  RUN_TIMEOUT_MS,
);

/** Starts the page's run (GPU_CLASS_SETTINGS) and expects every step done, no page error and finite losses. */
async function runsWithFiniteMetrics(page: Page, pageErrors: string[]): Promise<void> {
  await page.click('#start');
  await expect.poll(() => page.locator('#phase').innerText(), { timeout: RUN_TIMEOUT_MS }).toBe('done');
  expect(await stepOf(page)).toBe(Number(GPU_CLASS_SETTINGS.steps));
  expect(pageErrors).toEqual([]);
  const steps = (await downloadMetrics(page)).filter((m) => 'critic/score/mean' in m);
  expect(steps).toHaveLength(Number(GPU_CLASS_SETTINGS.steps));
  for (const m of steps)
    for (const key of ['actor/pg_loss', 'actor/ppo_kl', 'actor/grad_norm', 'critic/vf_loss'])
      expect(Number.isFinite(m[key]), `${key} = ${m[key]}`).toBe(true);
}

test(
  '?WEBGPU_DEVICE_CLASS=gpu runs the GPU kernel variants in the tab (what a real GPU runs): a few PPO steps, finite ' +
    'metrics',
  async () => {
    const { page, pageErrors } = await openDemo('?WEBGPU_DEVICE_CLASS=gpu');
    expect(await text(page, 'device-class')).toBe('gpu');
    for (const [name, value] of Object.entries(GPU_CLASS_SETTINGS)) await page.fill(`input[name=${name}]`, value);
    expect(await page.locator('#command').innerText()).toMatch(/^WEBGPU_DEVICE_CLASS=gpu node train\.js /);
    await runsWithFiniteMetrics(page, pageErrors);
  },
  RUN_TIMEOUT_MS,
);

test(
  '?WEBGPU_LIMITS=default keeps the tab within the WebGPU default limits (what a phone gives): a few PPO steps, ' +
    'finite metrics',
  async () => {
    const { page, pageErrors } = await openDemo('?WEBGPU_LIMITS=default&WEBGPU_DEVICE_CLASS=gpu');
    expect(await page.locator('#device').innerText()).toMatch(/\(WebGPU default limits\)$/);
    for (const [name, value] of Object.entries(GPU_CLASS_SETTINGS)) await page.fill(`input[name=${name}]`, value);
    expect(await page.locator('#command').innerText()).toMatch(
      /^WEBGPU_DEVICE_CLASS=gpu WEBGPU_LIMITS=default node train\.js /,
    );
    await runsWithFiniteMetrics(page, pageErrors);
  },
  RUN_TIMEOUT_MS,
);

test('a bad ?WEBGPU_DEVICE_CLASS is named on the page', async () => {
  const page = await browser.newPage();
  await page.goto(`http://127.0.0.1:${(server.address() as AddressInfo).port}/?WEBGPU_DEVICE_CLASS=tpu`);
  await expect
    .poll(() => page.locator('#no-webgpu-reason').innerText(), { timeout: 60_000 })
    .toContain('WEBGPU_DEVICE_CLASS: "tpu" must be gpu or cpu');
});
