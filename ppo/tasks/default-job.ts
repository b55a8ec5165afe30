// The built-in default job: a tiny Qwen3-style model learns multi-digit addition (its settings: the layer
// examples/arithmetic_tiny.yaml, imported as text so the browser demo bundles it too). The built-in actor (used
// when actor_rollout_ref.model.path is null) is created from scratch and given its task's short supervised warm
// start (ppo/tasks/builtin-tasks.ts: pretraining on correct sums, then SFT on sloppy demonstrations) — enough to be
// right part of the time — after which PPO with a GAE critic and the exact-match rule reward takes over.
// Browser-safe: the caller provides the engine and receives progress.
import type { Engine } from '../../engine/index.ts';
import { Rng } from '../../engine/rng.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { initialParameters } from '../../models/init.ts';
import { tinyQwen3Config } from '../../models/presets.ts';
import type { DecoderConfig } from '../../models/hf-config.ts';
import type { Arena } from '../../engine/index.ts';
import { AdamWOptimizer } from '../training/adamw-optimizer.ts';
import { SftTrainer, type SftStepResult } from '../sft/sft-trainer.ts';
import type { WarmStartStage } from './builtin-tasks.ts';
import type { ConfigLayer } from '../config.ts';
import DEFAULT_JOB_YAML from '../../examples/arithmetic_tiny.yaml';

/** The built-in job's layer over verl's defaults (what `node train.js` runs with no model and no data). */
export const DEFAULT_JOB: ConfigLayer = { text: DEFAULT_JOB_YAML, source: 'examples/arithmetic_tiny.yaml' };

export interface WarmStartResult {
  config: DecoderConfig;
  params: Arena;
  history: SftStepResult[];
}

/**
 * A saved warm start's own record, beside its checkpoint (the demo's starting model): how to make it again and its loss
 * per step.
 */
export const WARM_START_RECORD_FILE = 'warm_start.json';
export interface WarmStartRecord {
  command: string;
  trainerSeed: number;
  /**
   * data.seed: which prompts were training prompts, so a run from the checkpoint validates on the same held-out ones.
   */
  dataSeed: number;
  stages: { name: string; steps: number }[];
  loss: number[];
}

/**
 * Where a warm-start step sits: its stage, and the most steps all stages can take (a step's number counts across
 * them; a stage with `until` may end before its `maxSteps`).
 */
export interface WarmStartProgress {
  stage: string;
  totalSteps: number;
}

/**
 * The stages with `totalSteps` steps among them, shared in the stages' own proportions (at least one each), without
 * their loss gates: a caller that sets the count (the demo) gets that count.
 */
export function withTotalSteps(stages: readonly WarmStartStage[], totalSteps: number): WarmStartStage[] {
  const planned = stages.reduce((sum, stage) => sum + stage.steps, 0);
  let before = 0;
  return stages.map((stage) => {
    const start = Math.round((before * totalSteps) / planned);
    before += stage.steps;
    const { until: _gate, ...fixed } = stage;
    return { ...fixed, steps: Math.max(1, Math.round((before * totalSteps) / planned) - start) };
  });
}

/** A cosine decay from 1 at `step` 0 to a tenth at `steps`. */
function cosineDecay(step: number, steps: number): number {
  return 0.1 + 0.9 * 0.5 * (1 + Math.cos((Math.PI * step) / steps));
}

/**
 * The stage's learning rate at `step`: a 10-step warmup and a cosine decay to a tenth over its `steps`; past them,
 * its loss gate's restarted cosine cycles.
 */
export function stageLr(stage: WarmStartStage, step: number): number {
  const gate = stage.until;
  if (gate && step >= stage.steps)
    return gate.lr * cosineDecay((step - stage.steps) % gate.cycleSteps, gate.cycleSteps);
  const warmup = Math.min(1, (step + 1) / 10);
  return stage.lr * warmup * cosineDecay(Math.min(step, stage.steps), stage.steps);
}

/** Whether the stage goes on after `losses` (its steps so far): its schedule, then its loss gate. */
export function stageContinues(stage: WarmStartStage, losses: readonly number[]): boolean {
  if (losses.length < stage.steps) return true;
  const gate = stage.until;
  if (!gate || losses.length >= gate.maxSteps) return false;
  const recent = losses.slice(-gate.window);
  return recent.reduce((sum, loss) => sum + loss, 0) / recent.length >= gate.meanLossBelow;
}

/**
 * Creates the built-in actor (seeded) and trains it through the task's warm-start stages in order, each from a
 * freshly reset AdamW with a 10-step warmup and a cosine decay to a tenth of its learning rate, then on in restarted
 * cosine cycles while its loss gate (`until`) is not met.
 */
export async function warmStartBuiltinActor(
  engine: Engine,
  options: { stages: readonly WarmStartStage[]; batchSize: number; seed: number },
  tokenizer: { vocabSize: number; padId: number },
  onStep: (result: SftStepResult, progress: WarmStartProgress) => void,
): Promise<WarmStartResult> {
  const config = tinyQwen3Config(tokenizer.vocabSize);
  const params = createParameterArena(engine, config, 'actor');
  uploadArenaTensors(engine, params, initialParameters(config, options.seed));
  const model = new CausalLm(engine, config, params);
  // Every step passes its stage's scheduled learning rate.
  const optimizer = new AdamWOptimizer(engine, params, {
    lr: 0,
    betas: [0.9, 0.95],
    eps: 1e-8,
    weightDecay: 0.01,
    maxGradNorm: 1,
  });
  const T = Math.max(
    ...options.stages.flatMap((stage) => stage.examples.map((e) => e.prompt.length + e.response.length)),
  );
  const trainer = new SftTrainer(engine, model, optimizer, { B: options.batchSize, T, padId: tokenizer.padId });
  const rng = new Rng(options.seed);
  const totalSteps = options.stages.reduce((sum, stage) => sum + Math.max(stage.steps, stage.until?.maxSteps ?? 0), 0);
  const history: SftStepResult[] = [];
  for (const stage of options.stages) {
    optimizer.reset();
    const losses: number[] = [];
    while (stageContinues(stage, losses)) {
      const batch = Array.from(
        { length: options.batchSize },
        () => stage.examples[Math.floor(rng.next() * stage.examples.length)],
      );
      const result = await trainer.trainStep(batch, stageLr(stage, losses.length));
      losses.push(result.loss);
      history.push(result);
      onStep(result, { stage: stage.name, totalSteps });
    }
  }
  return { config, params, history };
}
