// The page: checks for WebGPU, creates the engine on the tab's device, fetches the shipped starting checkpoint,
// turns the settings into a config (and the equivalent `node train.js` line), and shows a TrainingSession's
// progress as status, charts, sample answers and a metrics log to download.
import { Engine, readKnobs, type EngineKnobs } from '../../engine/index.ts';
import { ConfigError, type PpoConfig } from '../../ppo/config.ts';
import { MetricCharts } from './charts.ts';
import { MetricsLog } from './metrics-log.ts';
import { TrainingSession, type Phase, type SampleAnswer } from './session.ts';
import { demoConfig, readSettings, trainCommand } from './settings.ts';
import { fetchShippedCheckpoint, type ShippedCheckpoint } from './shipped-checkpoint.ts';

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

const form = $<HTMLFormElement>('settings');
const buttons = {
  start: $<HTMLButtonElement>('start'),
  pause: $<HTMLButtonElement>('pause'),
  reset: $<HTMLButtonElement>('reset'),
  download: $<HTMLButtonElement>('download'),
  downloadMetrics: $<HTMLButtonElement>('download-metrics'),
};
const startField = form.elements.namedItem('startFrom') as HTMLSelectElement;
const warmStartStepsField = form.elements.namedItem('warmStartSteps') as HTMLInputElement;
const charts = new MetricCharts($('charts'));
const metricsLog = new MetricsLog();

/** The engine's knobs from the page's query, as `node train.js` reads them from its environment:
 *  `?WEBGPU_DEVICE_CLASS=gpu` runs the GPU variants even on a software adapter (SwiftShader). */
function pageKnobs(): EngineKnobs {
  const query: Record<string, string> = {};
  new URLSearchParams(location.search).forEach((value, key) => (query[key] = value));
  return readKnobs(query);
}

let engine: Engine | null = null;
let checkpoint: ShippedCheckpoint | null = null;
let session: TrainingSession | null = null;
let phase: Phase | 'idle' | 'error' = 'idle';

function show(id: string, text: string): void {
  $(id).textContent = text;
}

function formatNumber(value: number, digits: number): string {
  return Number.isFinite(value) ? value.toFixed(digits) : '–';
}

function setPhase(next: typeof phase, detail = ''): void {
  phase = next;
  show('phase', detail ? `${next}: ${detail}` : next);
  const running = next === 'loading checkpoint' || next === 'warm start' || next === 'training';
  buttons.start.disabled = !(next === 'idle' || next === 'paused');
  buttons.start.textContent = next === 'paused' ? 'Resume' : 'Start';
  buttons.pause.disabled = !running;
  buttons.reset.disabled = next === 'idle';
  buttons.download.disabled = !session?.canExport;
  buttons.downloadMetrics.disabled = metricsLog.empty;
  form.querySelectorAll('fieldset').forEach((f) => (f.disabled = next !== 'idle'));
}

/**
 * The answer with each space drawn as ␣: "95 " and "95" look alike as plain text, and the trailing space is
 * exactly what the reward rejects and PPO learns to drop.
 */
function visibleSpaces(text: string): string {
  return text.replaceAll(' ', '\u2423');
}

function showSamples(samples: SampleAnswer[]): void {
  const rows = samples.map((s) => {
    const row = document.createElement('tr');
    for (const [text, title] of [
      [s.question, null],
      [s.answer === '' ? '(empty)' : visibleSpaces(s.answer), JSON.stringify(s.answer)],
      [s.expected, null],
      [s.correct ? '✓ yes' : '✗ no', null],
    ] as const) {
      const cell = document.createElement('td');
      cell.textContent = text;
      if (title !== null) cell.title = title;
      row.append(cell);
    }
    row.className = s.correct ? 'correct' : 'wrong';
    return row;
  });
  $('samples')
    .querySelector('tbody')!
    .replaceChildren(...rows);
}

function showConfigError(message: string | null): void {
  const box = $('config-error');
  box.hidden = message === null;
  box.textContent = message ?? '';
}

function currentSettings() {
  return readSettings(form, checkpoint && { dataSeed: checkpoint.record.dataSeed });
}

/** The command line of the current settings, and whether they are valid. */
function showCommand(): void {
  warmStartStepsField.disabled = startField.value === 'checkpoint';
  const settings = currentSettings();
  const { command, differences } = trainCommand(settings);
  // The engine knobs the page's query sets, as the environment of the same run on the command line.
  const query = new URLSearchParams(location.search);
  const knobs = ['WEBGPU_DEVICE_CLASS', 'WEBGPU_LIMITS'].flatMap((k) => (query.get(k) ? [`${k}=${query.get(k)}`] : []));
  show('command', [...knobs, command].join(' '));
  show('command-differences', `Differences: ${differences.join('; ')}.`);
}

function showShippedWarmStart(): void {
  checkpoint!.record.loss.forEach((loss, i) => charts.recordWarmStart(i + 1, loss));
}

function start(): void {
  if (phase === 'paused') {
    session!.resume();
    return;
  }
  let config: PpoConfig;
  const settings = currentSettings();
  try {
    config = demoConfig(settings);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    showConfigError(`Invalid settings: ${err.problems.join('; ')}`);
    return;
  }
  showConfigError(null);
  charts.reset();
  metricsLog.clear();
  if (settings.checkpoint) showShippedWarmStart();
  const current = new TrainingSession(engine!, config, settings, checkpoint, {
    phase: (p) => setPhase(p),
    warmStartStep: (r, { stage, totalSteps }) => {
      show('tokens-per-second', formatNumber(r.tokensPerSecond, 0));
      show('step-time', `${formatNumber(r.ms, 0)} ms`);
      charts.recordWarmStart(r.step, r.loss);
      setPhase('warm start', `${stage} step ${r.step}/${totalSteps}, loss ${formatNumber(r.loss, 3)}`);
    },
    step: (m, total) => {
      const step = m['training/global_step'];
      metricsLog.record(m);
      show('step', String(step));
      show('reward', formatNumber(m['critic/score/mean'], 3));
      show('tokens-per-second', formatNumber(m['perf/throughput'], 0));
      show('step-time', `${formatNumber(m['timing_s/step'], 2)} s`);
      charts.record(step, m);
      if (phase === 'training') show('phase', `training: step ${step}/${total}`);
      buttons.download.disabled = false;
      buttons.downloadMetrics.disabled = false;
    },
    validation: (step, metrics, samples) => {
      metricsLog.record({ 'training/global_step': step, ...metrics });
      const accuracy = metrics['val/test_score/mean'];
      show('accuracy', formatNumber(accuracy, 3));
      if (step === 0) show('start-accuracy', formatNumber(accuracy, 3));
      charts.record(step, metrics);
      showSamples(samples);
      $('samples-note').textContent =
        `Greedy answers after ${step} PPO step${step === 1 ? '' : 's'} (␣ marks a space).`;
      buttons.download.disabled = false;
      buttons.downloadMetrics.disabled = false;
    },
  });
  session = current;
  current.finished.catch((err: Error) => {
    console.error(err);
    setPhase('error', err.message);
  });
}

async function reset(): Promise<void> {
  const ending = session;
  session = null;
  if (ending) {
    ending.stop();
    await ending.finished.catch(() => undefined);
  }
  // A fresh device frees every buffer of the previous run at once.
  engine?.destroy();
  engine = await Engine.create(pageKnobs());
  show('step', '0');
  for (const id of ['reward', 'accuracy', 'start-accuracy', 'tokens-per-second', 'step-time']) show(id, '–');
  showSamples([]);
  charts.reset();
  if (checkpoint) showShippedWarmStart();
  metricsLog.clear();
  setPhase('idle');
}

function offerDownload(data: BlobPart, type: string, name: string): void {
  const url = URL.createObjectURL(new Blob([data], { type }));
  const link = document.createElement('a');
  link.href = url;
  link.download = name;
  link.click();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

async function download(): Promise<void> {
  if (!session) return;
  buttons.download.disabled = true;
  try {
    offerDownload(
      (await session.exportModels()) as Uint8Array<ArrayBuffer>,
      'application/zip',
      'webgpu-rlhf-models.zip',
    );
  } finally {
    buttons.download.disabled = false;
  }
}

function unsupported(reason: string): void {
  $('no-webgpu').hidden = false;
  show('no-webgpu-reason', reason);
  $('app').hidden = true;
}

/**
 * Without the shipped checkpoint (a build made before `node tools/demo-checkpoint.js` ran) the warm start runs live.
 */
async function loadShippedCheckpoint(): Promise<void> {
  const option = startField.querySelector<HTMLOptionElement>('option[value=checkpoint]')!;
  try {
    checkpoint = await fetchShippedCheckpoint();
    const { stages, trainerSeed } = checkpoint.record;
    option.textContent =
      `the default job's warm-started model ` +
      `(${stages.map((s) => `${s.steps} ${s.name}`).join(' + ')} steps, seed ${trainerSeed})`;
    if (phase === 'idle') showShippedWarmStart();
  } catch (err) {
    console.warn((err as Error).message);
    option.disabled = true;
    option.textContent = 'the shipped checkpoint (missing from this build)';
    startField.value = 'live';
  }
  showCommand();
}

async function init(): Promise<void> {
  if (!('gpu' in navigator)) {
    unsupported(
      window.isSecureContext
        ? 'This browser does not offer WebGPU (navigator.gpu is missing).'
        : 'WebGPU is only available on secure pages: open the demo over https or from localhost.',
    );
    return;
  }
  try {
    engine = await Engine.create(pageKnobs());
  } catch (err) {
    unsupported(`WebGPU is present but no device could be created: ${(err as Error).message}`);
    return;
  }
  show(
    'device',
    `${engine.caps.description || 'unnamed WebGPU adapter'}${engine.caps.defaultLimits ? ' (WebGPU default limits)' : ''}`,
  );
  show('device-class', engine.caps.deviceClass);
  buttons.start.addEventListener('click', start);
  buttons.pause.addEventListener('click', () => session?.pause());
  buttons.reset.addEventListener('click', () => void reset());
  buttons.download.addEventListener('click', () => void download());
  buttons.downloadMetrics.addEventListener('click', () =>
    offerDownload(metricsLog.jsonl(), 'application/x-ndjson', 'metrics.jsonl'),
  );
  form.addEventListener('input', showCommand);
  await loadShippedCheckpoint();
  setPhase('idle');
}

void init();
