// The browser demo end to end in a real browser: builds demo/, serves demo/dist on loopback, drives Debian's
// headless Chromium (WebGPU on SwiftShader) through a short run, waits for PPO_STEPS steps, checks that the
// metrics are finite and every chart has points, and saves a screenshot and the measured step rate to
// test-artifacts/, then downloads the models and opens them as Hugging Face directories with the Node loaders.
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
import { openHfCheckpoint } from '../../models/checkpoint-io.ts';
import { loadTokenizer } from '../../models/tokenizer-node.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const DIST = join(ROOT, 'demo/dist');
const ARTIFACTS = join(ROOT, 'test-artifacts');
const CHROMIUM = '/usr/bin/chromium';
// Closed network: no update checks, sync or first-run fetches. --no-sandbox because CI runs as root.
const CHROMIUM_FLAGS = [
  '--enable-unsafe-webgpu', '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--no-first-run', '--no-sandbox',
];
const PPO_STEPS = 5;
// Small enough for SwiftShader on two shared cores: a few seconds per PPO step.
const RUN_SETTINGS = { warmStartSteps: '20', batchSize: '8', steps: String(PPO_STEPS) };
const RUN_TIMEOUT_MS = 480_000;

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.svg': 'image/svg+xml', '.png': 'image/png',
};

function serveStatic(dir: string): Promise<Server> {
  const server = createServer(async (req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname)).replace(/^(\.\.[/\\])+/, '');
    const file = join(dir, path.endsWith('/') ? `${path}index.html` : path);
    const found = file.startsWith(dir) && (await stat(file).then((s) => s.isFile(), () => false));
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
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: run \`bash tools/setup.sh\` (it installs Debian's chromium for this test)`);
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

test('the demo trains PPO live in headless Chromium and charts it', async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1100 } });
  const pageErrors: string[] = [];
  page.on('pageerror', (err) => pageErrors.push(err.message));
  page.on('console', (msg) => msg.type() === 'error' && pageErrors.push(msg.text()));
  await page.goto(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);

  await expect.poll(() => page.locator('#device').innerText(), { timeout: 60_000 }).toMatch(/swiftshader/i);
  for (const [name, value] of Object.entries(RUN_SETTINGS)) await page.fill(`input[name=${name}]`, value);
  await page.click('#start');

  const firstStep = page.waitForFunction(() => Number(document.querySelector('[data-testid=step]')!.textContent) >= 1, null, { timeout: RUN_TIMEOUT_MS, polling: 100 });
  await firstStep;
  const firstStepAt = performance.now();
  await page.waitForFunction((n) => Number(document.querySelector('[data-testid=step]')!.textContent) >= n, PPO_STEPS, { timeout: RUN_TIMEOUT_MS, polling: 100 });
  const stepsPerSecond = (PPO_STEPS - 1) / ((performance.now() - firstStepAt) / 1000);
  // The last step is followed by a validation: accuracy is final once the run says done.
  await expect.poll(() => page.locator('#phase').innerText(), { timeout: 60_000 }).toBe('done');

  expect(Number(await text(page, 'step'))).toBe(PPO_STEPS);
  const reward = Number(await text(page, 'reward'));
  const accuracy = Number(await text(page, 'accuracy'));
  expect(reward).toBeGreaterThanOrEqual(0);
  expect(reward).toBeLessThanOrEqual(1);
  expect(accuracy).toBeGreaterThanOrEqual(0);
  expect(accuracy).toBeLessThanOrEqual(1);
  for (const id of ['tokens-per-second', 'step-time']) expect(Number.parseFloat(await page.locator(`#${id}`).innerText())).toBeGreaterThan(0);
  const chartPoints = await page.locator('figure.chart').evaluateAll((figures) => figures.map((f) => Number((f as HTMLElement).dataset.points)));
  expect(chartPoints.length).toBe(5);
  for (const points of chartPoints) expect(points).toBeGreaterThanOrEqual(PPO_STEPS);
  expect(await page.locator('#samples tbody tr').count()).toBeGreaterThan(0);
  expect(pageErrors).toEqual([]);

  await mkdir(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, 'demo.png'), fullPage: true });
  await writeFile(join(ARTIFACTS, 'demo.json'), JSON.stringify({ stepsPerSecond, settings: RUN_SETTINGS, reward, accuracy }, null, 2) + '\n');
  console.log(`browser demo: ${stepsPerSecond.toFixed(3)} PPO steps/s (steps 2-${PPO_STEPS}, ${RUN_SETTINGS.batchSize} prompts each)`);

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
}, RUN_TIMEOUT_MS + 180_000);
