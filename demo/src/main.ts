// The page: checks for WebGPU, creates the engine on the tab's device, turns the settings into a config,
// and shows a TrainingSession's progress as status, charts and sample answers.
import { Engine } from '../../engine/index.ts';
import { ConfigError } from '../../ppo/config.ts';
import { MetricCharts } from './charts.ts';
import { TrainingSession, type Phase, type SampleAnswer } from './session.ts';
import { demoConfig, readSettings } from './settings.ts';

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

const form = $<HTMLFormElement>('settings');
const buttons = {
  start: $<HTMLButtonElement>('start'),
  pause: $<HTMLButtonElement>('pause'),
  reset: $<HTMLButtonElement>('reset'),
  download: $<HTMLButtonElement>('download'),
};
const charts = new MetricCharts($('charts'));

let engine: Engine | null = null;
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
  const running = next === 'warm start' || next === 'training';
  buttons.start.disabled = !(next === 'idle' || next === 'paused');
  buttons.start.textContent = next === 'paused' ? 'Resume' : 'Start';
  buttons.pause.disabled = !running;
  buttons.reset.disabled = next === 'idle';
  buttons.download.disabled = !session?.canExport;
  form.querySelectorAll('fieldset').forEach((f) => (f.disabled = next !== 'idle'));
}

function showSamples(samples: SampleAnswer[]): void {
  const rows = samples.map((s) => {
    const row = document.createElement('tr');
    for (const text of [s.question, s.answer || '(empty)', s.expected, s.correct ? '✓ yes' : '✗ no']) {
      const cell = document.createElement('td');
      cell.textContent = text;
      row.append(cell);
    }
    row.className = s.correct ? 'correct' : 'wrong';
    return row;
  });
  $('samples').querySelector('tbody')!.replaceChildren(...rows);
}

function showConfigError(message: string | null): void {
  const box = $('config-error');
  box.hidden = message === null;
  box.textContent = message ?? '';
}

function start(): void {
  if (phase === 'paused') {
    session!.resume();
    return;
  }
  let config;
  const settings = readSettings(form);
  try {
    config = demoConfig(settings);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    showConfigError(`Invalid settings: ${err.problems.join('; ')}`);
    return;
  }
  showConfigError(null);
  charts.reset();
  const current = new TrainingSession(engine!, config, settings, {
    phase: (p) => setPhase(p),
    warmStartStep: (r, { stage, totalSteps }) => {
      show('tokens-per-second', formatNumber(r.tokensPerSecond, 0));
      show('step-time', `${formatNumber(r.ms, 0)} ms`);
      setPhase('warm start', `${stage} step ${r.step}/${totalSteps}, loss ${formatNumber(r.loss, 3)}`);
    },
    step: (m, total) => {
      const step = m['training/global_step'];
      show('step', String(step));
      show('reward', formatNumber(m['critic/score/mean'], 3));
      show('tokens-per-second', formatNumber(m['perf/throughput'], 0));
      show('step-time', `${formatNumber(m['timing_s/step'], 2)} s`);
      charts.record(step, m);
      if (phase === 'training') show('phase', `training: step ${step}/${total}`);
      buttons.download.disabled = false;
    },
    validation: (step, accuracy, samples) => {
      show('accuracy', formatNumber(accuracy, 3));
      charts.record(step, { 'val/test_score/mean': accuracy });
      showSamples(samples);
      $('samples-note').textContent = `Greedy answers after ${step} PPO step${step === 1 ? '' : 's'}.`;
      buttons.download.disabled = false;
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
  engine = await Engine.create();
  show('step', '0');
  for (const id of ['reward', 'accuracy', 'tokens-per-second', 'step-time']) show(id, '–');
  showSamples([]);
  charts.reset();
  setPhase('idle');
}

async function download(): Promise<void> {
  if (!session) return;
  buttons.download.disabled = true;
  try {
    const zip = await session.exportModels();
    const url = URL.createObjectURL(new Blob([zip as Uint8Array<ArrayBuffer>], { type: 'application/zip' }));
    const link = document.createElement('a');
    link.href = url;
    link.download = 'webgpu-rlhf-models.zip';
    link.click();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  } finally {
    buttons.download.disabled = false;
  }
}

function unsupported(reason: string): void {
  $('no-webgpu').hidden = false;
  show('no-webgpu-reason', reason);
  $('app').hidden = true;
}

async function init(): Promise<void> {
  if (!('gpu' in navigator)) {
    unsupported(window.isSecureContext
      ? 'This browser does not offer WebGPU (navigator.gpu is missing).'
      : 'WebGPU is only available on secure pages: open the demo over https or from localhost.');
    return;
  }
  try {
    engine = await Engine.create();
  } catch (err) {
    unsupported(`WebGPU is present but no device could be created: ${(err as Error).message}`);
    return;
  }
  show('device', engine.caps.description || 'unnamed WebGPU adapter');
  buttons.start.addEventListener('click', start);
  buttons.pause.addEventListener('click', () => session?.pause());
  buttons.reset.addEventListener('click', () => void reset());
  buttons.download.addEventListener('click', () => void download());
  setPhase('idle');
}

void init();
