// The per-step console line: step, ETA, and the numbers a PPO user watches; and the progress line of a
// validation, whose generation alone can take minutes.
import type { RolloutProgress } from '../generation/types.ts';

function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) return '?';
  // Rounded first: 299.7 s is 5m00s, not 4m60s.
  const whole = Math.round(seconds);
  const m = Math.floor(whole / 60);
  const s = whole % 60;
  return m > 0 ? `${m}m${String(s).padStart(2, '0')}s` : `${s}s`;
}

function progressBar(done: number, total: number): string {
  const width = 20;
  const filled = Math.round((width * done) / total);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]`;
}

/** `elapsedSeconds` since step `firstStep` (where this process started or resumed). */
export function formatStepLine(
  m: Record<string, number>,
  totalSteps: number,
  firstStep: number,
  elapsedSeconds: number,
): string {
  const step = m['training/global_step'];
  const eta = (elapsedSeconds / (step - firstStep)) * (totalSteps - step);
  const bar = progressBar(step, totalSteps);
  const accuracy = m['critic/score/accuracy'];
  const parts = [
    `${bar} step ${step}/${totalSteps} eta ${formatDuration(eta)}`,
    `reward ${m['critic/score/mean'].toFixed(3)}`,
    ...(accuracy !== undefined ? [`acc ${(100 * accuracy).toFixed(1)}%`] : []),
  ];
  const optional: [string, string, number][] = [
    ['kl', 'actor/reward_kl_penalty', 4],
    ['kl_loss', 'actor/kl_loss', 4],
    ['ppo_kl', 'actor/ppo_kl', 4],
    ['entropy', 'actor/entropy', 3],
    ['clipfrac', 'actor/pg_clipfrac', 3],
    ['vf_loss', 'critic/vf_loss', 4],
    ['len', 'response_length/mean', 1],
    ['searches', 'env/number_of_valid_search', 2],
    ['tool calls', 'tool_call_counts/mean', 2],
    ['tok/s', 'perf/throughput', 0],
    ['mfu', 'perf/mfu', 3],
    ['mem GiB', 'perf/max_memory_allocated_gb', 2],
  ];
  for (const [label, key, digits] of optional)
    if (m[key] !== undefined) parts.push(`${label} ${m[key].toFixed(digits)}`);
  const phases = Object.keys(m)
    .filter((k) => k.startsWith('timing_s/') && k !== 'timing_s/step')
    .map((k) => `${k.slice('timing_s/'.length)} ${m[k].toFixed(1)}s`);
  return `${parts.join('  ')}  (${phases.join(', ')})`;
}

/** A validation's progress `elapsedSeconds` into its generation. */
export function formatValidationLine(p: RolloutProgress, elapsedSeconds: number): string {
  const eta = (elapsedSeconds / p.done) * (p.total - p.done);
  return (
    `${progressBar(p.done, p.total)} validation ${p.done}/${p.total} sequences eta ${formatDuration(eta)}  ` +
    `${Math.round(p.tokens / elapsedSeconds)} generated tok/s  (${formatDuration(elapsedSeconds)} so far)`
  );
}

/**
 * A rollout's onProgress that writes formatValidationLine at most once per `intervalSeconds`, the first after one
 * interval (a validation that ends sooner prints nothing but its result line). `now` returns milliseconds.
 */
export function validationProgress(
  write: (line: string) => void,
  intervalSeconds = 10,
  now: () => number = () => performance.now(),
): (p: RolloutProgress) => void {
  const started = now();
  let last = started;
  return (p) => {
    const t = now();
    if (t - last < intervalSeconds * 1000) return;
    last = t;
    write(formatValidationLine(p, (t - started) / 1000));
  };
}
