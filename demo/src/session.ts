// One training run in the tab: the built-in setup (the shipped checkpoint or a live warm start, critic), then PPO steps
// until the configured total, validating every trainer.test_freq steps and at the end (ppo/jobs/ppo-run-loop.ts, the
// loop of node train.js, with no checkpoints). Pause and stop take effect between steps; work that reads the GPU (a
// step, a validation, an export) runs one at a time so their command streams never interleave.
import type { Engine } from '../../engine/index.ts';
import type { PpoConfig } from '../../ppo/config.ts';
import { PromptSampler, totalTrainingSteps, type RlExample } from '../../ppo/data/dataset.ts';
import { runTrainerIo, setUpBuiltinRun, type BuiltinRun } from '../../ppo/jobs/builtin-run.ts';
import { PpoTrainer } from '../../ppo/trainer.ts';
import { runTrainingLoop } from '../../ppo/jobs/ppo-run-loop.ts';
import type { SftStepResult } from '../../ppo/sft/sft-trainer.ts';
import type { WarmStartProgress } from '../../ppo/tasks/default-job.ts';
import { modelsZip, type ModelToExport } from './export.ts';
import { DEMO_VAL_SIZE, WARM_START_BATCH, type DemoSettings } from './settings.ts';
import type { ShippedCheckpoint } from './shipped-checkpoint.ts';

export type Phase = 'loading checkpoint' | 'warm start' | 'training' | 'paused' | 'done' | 'stopped';

export interface SampleAnswer {
  question: string;
  answer: string;
  expected: string;
  correct: boolean;
}

export interface SessionListener {
  phase(phase: Phase): void;
  warmStartStep(result: SftStepResult, progress: WarmStartProgress): void;
  step(metrics: Record<string, number>, totalSteps: number): void;
  /** `metrics`: the trainer's val/* metrics. */
  validation(step: number, metrics: Record<string, number>, samples: SampleAnswer[]): void;
}

class Stopped extends Error {}

export class TrainingSession {
  private trainer: PpoTrainer | null = null;
  private run: BuiltinRun | null = null;
  private stopped = false;
  private paused = false;
  private resumeWaiter: (() => void) | null = null;
  private exclusiveChain: Promise<unknown> = Promise.resolve();
  /** Settles when the run has ended (finished, stopped or failed). */
  readonly finished: Promise<void>;

  constructor(
    private readonly engine: Engine,
    private readonly config: PpoConfig,
    private readonly settings: DemoSettings,
    /** The page's starting model, used when settings.checkpoint is set. */
    private readonly checkpoint: ShippedCheckpoint | null,
    private readonly listener: SessionListener,
  ) {
    this.finished = this.main();
  }

  get canExport(): boolean {
    return this.trainer !== null;
  }

  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
    this.resumeWaiter?.();
  }

  stop(): void {
    this.stopped = true;
    this.resume();
  }

  /** The actor and critic as Hugging Face directories in a zip. */
  exportModels(): Promise<Uint8Array> {
    return this.exclusive(async () => {
      const trainer = this.trainer;
      if (!trainer || !this.run) throw new Error('no model yet: the warm start is still running');
      const models: ModelToExport[] = [{ dir: 'actor', weights: trainer.actor }];
      if (trainer.critic) models.push({ dir: 'critic', weights: trainer.critic });
      return modelsZip(this.engine, `webgpu-rlhf-step-${trainer.globalStep}`, models, this.run.tokenizerFiles);
    });
  }

  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const result = this.exclusiveChain.then(work);
    this.exclusiveChain = result.catch(() => undefined);
    return result;
  }

  private async main(): Promise<void> {
    try {
      await this.train();
      this.listener.phase(this.stopped ? 'stopped' : 'done');
    } catch (err) {
      if (!(err instanceof Stopped)) throw err;
      this.listener.phase('stopped');
    }
  }

  private async train(): Promise<void> {
    const { config, settings, listener } = this;
    if (settings.checkpoint && !this.checkpoint)
      throw new Error('the shipped checkpoint was chosen but the page has none');
    listener.phase(settings.checkpoint ? 'loading checkpoint' : 'warm start');
    const run = await setUpBuiltinRun(this.engine, config, {
      valSize: DEMO_VAL_SIZE,
      actor: settings.checkpoint ? this.checkpoint!.upload(this.engine) : undefined,
      warmStart: { steps: settings.warmStartSteps, batchSize: WARM_START_BATCH },
      onWarmStartStep: (result, progress) => {
        // The warm start has no pause point of its own: stopping aborts it from its progress callback.
        if (this.stopped) throw new Stopped();
        listener.warmStartStep(result, progress);
      },
    });
    this.run = run;
    const sampler = PromptSampler.fromConfig(run.train.length, config.data);
    const totalSteps = totalTrainingSteps(sampler, config.trainer);
    const trainer = new PpoTrainer(
      this.engine,
      config,
      run.actor,
      run.critic,
      runTrainerIo(run, sampler).io,
      totalSteps,
    );
    this.trainer = trainer;
    await this.validate();
    listener.phase('training');
    await runTrainingLoop(trainer, totalSteps, config.trainer, {
      step: async () => listener.step(await this.exclusive(() => trainer.step()), totalSteps),
      validate: () => this.validate(),
      beforeStep: async () => {
        while (this.paused && !this.stopped) {
          listener.phase('paused');
          await new Promise<void>((resolve) => (this.resumeWaiter = resolve));
          this.resumeWaiter = null;
          if (!this.stopped) listener.phase('training');
        }
        return !this.stopped;
      },
    });
  }

  private async validate(): Promise<void> {
    const trainer = this.trainer!;
    const val = this.run!.val;
    const { metrics, samples } = await this.exclusive(() => trainer.validate());
    const byPrompt = new Map<string, RlExample>(val.map((e) => [e.promptIds.join(), e]));
    const answers = samples.map((s) => {
      const example = byPrompt.get(s.prompt.join())!;
      return {
        question: example.messages[0].content,
        answer: s.response,
        expected: String(example.groundTruth),
        correct: s.score > 0,
      };
    });
    this.listener.validation(trainer.globalStep, metrics, answers);
  }
}
