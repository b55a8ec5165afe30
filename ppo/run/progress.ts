// The per-step console line: step, ETA, and the numbers a PPO user watches.

function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) return '?';
  const m = Math.floor(seconds / 60);
  const s = Math.round(seconds % 60);
  return m > 0 ? `${m}m${String(s).padStart(2, '0')}s` : `${s}s`;
}

/** `elapsedSeconds` since step `firstStep` (where this process started or resumed). */
export function formatStepLine(m: Record<string, number>, totalSteps: number, firstStep: number, elapsedSeconds: number): string {
  const step = m['training/global_step'];
  const eta = (elapsedSeconds / (step - firstStep)) * (totalSteps - step);
  const width = 20;
  const filled = Math.round((width * step) / totalSteps);
  const bar = `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]`;
  const accuracy = m['critic/score/accuracy'];
  const parts = [
    `${bar} step ${step}/${totalSteps} eta ${formatDuration(eta)}`,
    `reward ${m['critic/score/mean'].toFixed(3)}`,
    ...(accuracy !== undefined ? [`acc ${(100 * accuracy).toFixed(1)}%`] : []),
  ];
  const optional: [string, string, number][] = [
    ['kl', 'actor/reward_kl_penalty', 4], ['kl_loss', 'actor/kl_loss', 4], ['ppo_kl', 'actor/ppo_kl', 4],
    ['entropy', 'actor/entropy', 3], ['clipfrac', 'actor/pg_clipfrac', 3], ['vf_loss', 'critic/vf_loss', 4],
    ['len', 'response_length/mean', 1], ['searches', 'env/number_of_valid_search', 2], ['tok/s', 'perf/throughput', 0],
    ['mfu', 'perf/mfu', 3], ['mem GiB', 'perf/max_memory_allocated_gb', 2],
  ];
  for (const [label, key, digits] of optional) if (m[key] !== undefined) parts.push(`${label} ${m[key].toFixed(digits)}`);
  const phases = Object.keys(m).filter((k) => k.startsWith('timing_s/') && k !== 'timing_s/step')
    .map((k) => `${k.slice('timing_s/'.length)} ${m[k].toFixed(1)}s`);
  return `${parts.join('  ')}  (${phases.join(', ')})`;
}
