// `node tools/bench.js train`: one whole supervised training step (forward, cross-entropy, backward, AdamW) at
// batch 8 × 128 tokens for the tiny and small benchmark configs; ms/step, tokens/s, achieved GFLOP/s and dispatches.
import type { Engine } from '../../engine/index.ts';
import { BENCH_TINY, BENCH_SMALL } from '../../models/presets.ts';
import type { DecoderConfig } from '../../models/hf-config.ts';
import { forwardFlopsPerToken } from '../../ppo/phases/metrics.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { initialParameters } from '../../models/init.ts';
import { AdamWOptimizer } from '../../ppo/phases/adamw-optimizer.ts';
import { SftTrainer, type SftExample } from '../../ppo/tasks/sft-trainer.ts';
import { seededRandom } from '../../engine/rng.ts';

export interface TrainBenchRow {
  config: 'tiny' | 'small';
  batch: number;
  seq_len: number;
  ms: number;
  tokens_per_s: number;
  gflops: number;
  /** Compute dispatches one step records (on CPU devices each costs ~0.1 ms whatever it does). */
  dispatches: number;
}

/** Forward + backward FLOPs of one step: 3 × the forward (the one formula the trainer's MFU uses too). */
export function trainStepFlops(c: DecoderConfig, B: number, T: number): number {
  return 3 * forwardFlopsPerToken(c, T) * B * T;
}

export async function benchmarkTrainStep(
  engine: Engine,
  options: { steps?: number; warmup?: number; configs?: TrainBenchRow['config'][] } = {},
): Promise<TrainBenchRow[]> {
  const B = 8;
  const T = 128;
  const steps = options.steps ?? 5;
  const warmup = options.warmup ?? 2;
  const rows: TrainBenchRow[] = [];
  const configs = options.configs ?? ['tiny', 'small'];
  for (const [name, config] of ([['tiny', BENCH_TINY], ['small', BENCH_SMALL]] as const).filter(([n]) => configs.includes(n))) {
    const params = createParameterArena(engine, config, `bench-${name}`);
    uploadArenaTensors(engine, params, initialParameters(config, 1));
    const model = new CausalLm(engine, config, params);
    const optimizer = new AdamWOptimizer(engine, params, { lr: 1e-3, betas: [0.9, 0.95], eps: 1e-8, weightDecay: 0.01, maxGradNorm: 1 });
    const trainer = new SftTrainer(engine, model, optimizer, { B, T, padId: 0 });
    const random = seededRandom(3);
    // Every position is a real token and half of each sequence is "response", so the loss covers 64 positions per row.
    const examples = (): SftExample[] =>
      Array.from({ length: B }, () => {
        const ids = Array.from({ length: T }, () => 1 + Math.floor(random() * (config.vocabSize - 1)));
        return { prompt: ids.slice(0, T / 2), response: ids.slice(T / 2) };
      });
    const times: number[] = [];
    let dispatches = 0;
    for (let i = 0; i < warmup + steps; i++) {
      const before = engine.dispatchCount;
      const result = await trainer.trainStep(examples());
      dispatches = engine.dispatchCount - before;
      if (i >= warmup) times.push(result.ms);
    }
    times.sort((a, b) => a - b);
    const ms = times[Math.floor(times.length / 2)];
    rows.push({
      config: name, batch: B, seq_len: T, ms,
      tokens_per_s: (B * T) / (ms / 1000),
      gflops: trainStepFlops(config, B, T) / (ms / 1000) / 1e9,
      dispatches,
    });
  }
  return rows;
}
