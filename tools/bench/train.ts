// `node tools/bench.js train`: one whole supervised training step (forward, cross-entropy, backward, AdamW) at batch 8
// × 128 tokens for the tiny and small benchmark configs (and, when asked, a GPT-2-124M-sized Llama); ms/step, tokens/s,
// achieved GFLOP/s and dispatches. The tiny config also runs the step as 4 micro-batches of 2 sequences accumulated
// into one AdamW update, as the PPO update's ppo_micro_batch_size_per_gpu splits a mini-batch: what a micro-batch costs
// in dispatches.
import type { Engine } from '../../engine/index.ts';
import { BENCH_TINY, BENCH_SMALL, BENCH_GPT2_124M } from '../../models/presets.ts';
import type { DecoderConfig } from '../../models/hf-config.ts';
import { forwardFlopsPerToken } from '../../ppo/metrics/step-metrics.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { uploadTokenBatch, type TokenBatch } from '../../models/token-batch.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { initialParameters } from '../../models/init.ts';
import { AdamWOptimizer } from '../../ppo/training/adamw-optimizer.ts';
import { SftTrainer, buildSftBatch, type SftExample } from '../../ppo/sft/sft-trainer.ts';
import { seededRandom } from '../../engine/rng.ts';

export interface TrainBenchRow {
  config: 'tiny' | 'small' | 'gpt2-124m';
  batch: number;
  seq_len: number;
  /** Micro-batches the batch is split into, their gradients accumulated into one update. */
  micro_batches: number;
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
  options: { steps?: number; warmup?: number; configs?: TrainBenchRow['config'][]; microBatches?: number[] } = {},
): Promise<TrainBenchRow[]> {
  const B = 8;
  const T = 128;
  const steps = options.steps ?? 5;
  const warmup = options.warmup ?? 2;
  const rows: TrainBenchRow[] = [];
  const configs = options.configs ?? ['tiny', 'small'];
  const microBatchCounts = options.microBatches ?? [1, 4];
  const runs = (
    [
      ['tiny', BENCH_TINY, 1],
      ['tiny', BENCH_TINY, 4],
      ['small', BENCH_SMALL, 1],
      ['gpt2-124m', BENCH_GPT2_124M, 1],
    ] as const
  ).filter(([n, , m]) => configs.includes(n) && microBatchCounts.includes(m));
  for (const [name, config, microBatches] of runs) {
    const params = createParameterArena(engine, config, `bench-${name}-${microBatches}`);
    uploadArenaTensors(engine, params, initialParameters(config, 1));
    const model = new CausalLm(engine, config, params);
    const optimizer = new AdamWOptimizer(engine, params, {
      lr: 1e-3,
      betas: [0.9, 0.95],
      eps: 1e-8,
      weightDecay: 0.01,
      maxGradNorm: 1,
    });
    const step =
      microBatches === 1
        ? sftStep(engine, model, optimizer, B, T)
        : accumulatedStep(engine, model, optimizer, B / microBatches, microBatches, T);
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
      const ms = await step(examples());
      dispatches = engine.dispatchCount - before;
      if (i >= warmup) times.push(ms);
    }
    times.sort((a, b) => a - b);
    const ms = times[Math.floor(times.length / 2)];
    rows.push({
      config: name,
      batch: B,
      seq_len: T,
      micro_batches: microBatches,
      ms,
      tokens_per_s: (B * T) / (ms / 1000),
      gflops: trainStepFlops(config, B, T) / (ms / 1000) / 1e9,
      dispatches,
    });
  }
  return rows;
}

/** A step's wall time in ms for `examples`. */
type BenchStep = (examples: SftExample[]) => Promise<number>;

function sftStep(engine: Engine, model: CausalLm, optimizer: AdamWOptimizer, B: number, T: number): BenchStep {
  const trainer = new SftTrainer(engine, model, optimizer, { B, T, padId: 0 });
  return async (examples) => (await trainer.trainStep(examples)).ms;
}

/** The SFT step's forward and backward per micro-batch of `rows` sequences (the loss weights of the whole batch),
 *  one AdamW update after the last; finished when the updated weights have been read. */
function accumulatedStep(
  engine: Engine,
  model: CausalLm,
  optimizer: AdamWOptimizer,
  rows: number,
  microBatches: number,
  T: number,
): BenchStep {
  const batches: (TokenBatch | undefined)[] = new Array(microBatches);
  const targets = Array.from({ length: microBatches }, (_, m) => engine.tensor(`bench.targets${m}`, [rows * T], 'u32'));
  const dLogprobs = Array.from({ length: microBatches }, (_, m) => engine.tensor(`bench.dLogprobs${m}`, [rows * T]));
  const firstWeight = model.params.get(model.params.names()[0]);
  return async (examples) => {
    const start = performance.now();
    const built = buildSftBatch(examples, T, 0);
    optimizer.zeroGrad();
    for (let m = 0; m < microBatches; m++) {
      const slice = {
        inputIds: built.host.inputIds.slice(m * rows, (m + 1) * rows),
        attentionMask: built.host.attentionMask.slice(m * rows, (m + 1) * rows),
      };
      batches[m] = uploadTokenBatch(engine, slice, model.config.vocabSize, `bench.mb${m}`, batches[m]);
      engine.upload(targets[m], built.targets.subarray(m * rows * T, (m + 1) * rows * T));
      engine.upload(dLogprobs[m], built.lossWeights.subarray(m * rows * T, (m + 1) * rows * T));
      model.tokenLogprobs(batches[m]!, targets[m], { saveForBackward: true });
      model.backward(dLogprobs[m], null, optimizer.grads);
    }
    await optimizer.step();
    await engine.read(firstWeight);
    return performance.now() - start;
  };
}
