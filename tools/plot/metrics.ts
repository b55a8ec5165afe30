// Reads a run's metrics.jsonl into per-step records: verl's file logger shape (`{"step": N, "data": {...}}` per
// line), or one flat object per line with `training/global_step` (runs written before the trainer used verl's shape).
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** Bad input from the user (missing directory or file, malformed line): reported as one line, without a stack. */
export class RunInputError extends Error {}

export const STEP_KEY = 'training/global_step';

export interface StepRecord {
  step: number;
  /** Finite numeric metrics of this step, in the order the trainer first wrote them. */
  metrics: Map<string, number>;
}

export interface RunMetrics {
  file: string;
  /** One record per step, ascending. */
  steps: StepRecord[];
}

export interface Point {
  step: number;
  value: number;
}

/**
 * Lines with the same step merge into one record, a later value replacing an earlier one: the trainer writes a
 * step's training and validation metrics as separate lines, and a resumed run appends steps it had already logged.
 */
export function parseMetrics(text: string, file: string): RunMetrics {
  const byStep = new Map<number, Map<string, number>>();
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    const where = `${file}:${i + 1}`;
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch (err) {
      throw new RunInputError(`${where}: invalid JSON (${(err as Error).message})`);
    }
    if (json === null || typeof json !== 'object' || Array.isArray(json)) {
      throw new RunInputError(
        `${where}: expected a JSON object of metrics, found ${Array.isArray(json) ? 'an array' : JSON.stringify(json)}`,
      );
    }
    const entry = json as Record<string, unknown>;
    const verlShape =
      'data' in entry && entry.data !== null && typeof entry.data === 'object' && !Array.isArray(entry.data);
    const record = (verlShape ? entry.data : entry) as Record<string, unknown>;
    const stepKey = verlShape ? 'step' : STEP_KEY;
    const step = entry[stepKey];
    if (typeof step !== 'number' || !Number.isInteger(step) || step < 0) {
      throw new RunInputError(`${where}: "${stepKey}" is ${JSON.stringify(step)}, expected a non-negative integer`);
    }
    const metrics = byStep.get(step) ?? new Map<string, number>();
    byStep.set(step, metrics);
    // JSON has no NaN or Infinity (JSON.stringify writes null): such values are gaps in a series, not errors.
    for (const [key, value] of Object.entries(record)) {
      if (key !== STEP_KEY && typeof value === 'number' && Number.isFinite(value)) metrics.set(key, value);
    }
  });
  const steps = [...byStep].map(([step, metrics]) => ({ step, metrics })).sort((a, b) => a.step - b.step);
  return { file, steps };
}

export function readRunMetrics(runDir: string): RunMetrics {
  if (!existsSync(runDir) || !statSync(runDir).isDirectory())
    throw new RunInputError(`run directory ${runDir} not found`);
  const file = join(runDir, 'metrics.jsonl');
  if (!existsSync(file))
    throw new RunInputError(`${file} not found (the trainer writes it when trainer.logger includes "file")`);
  const run = parseMetrics(readFileSync(file, 'utf8'), file);
  if (run.steps.length === 0) throw new RunInputError(`${file} has no metrics lines`);
  return run;
}

export function series(run: RunMetrics, key: string): Point[] {
  return run.steps.flatMap(({ step, metrics }) => (metrics.has(key) ? [{ step, value: metrics.get(key)! }] : []));
}

/** Every metric name in the run, in first-seen order. */
export function metricNames(run: RunMetrics): string[] {
  return [...new Set(run.steps.flatMap((s) => [...s.metrics.keys()]))];
}
