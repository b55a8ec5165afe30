// One PPO run of the command line (train.js), as verl's RayPPOTrainer.fit reads: find the checkpoint to resume (moving
// unreadable ones aside once the run directory may be written), read every input, claim the run directory, print the
// memory plan, then validate only (trainer.val_only), finish a trained run whose final validation did not finish, or
// train: the loop of ppo-run-loop.ts with this run's step, save (verl's _save_checkpoint) and validate (verl's
// _validate) hooks, and the summary. Every input is read before the run directory is touched, so a bad input leaves a
// previous run as it was.
import { writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { describeDevice, type Engine } from '../../engine/index.ts';
import { CheckpointError } from '../../models/checkpoint-io-node.ts';
import { loraParameterCount } from '../../models/lora.ts';
import { configToYaml, trainedModelDtypeNotes, usesRolloutServers, type PpoConfig } from '../config.ts';
import { PromptSampler, totalTrainingSteps, type DataCursor } from '../data/dataset.ts';
import { generationDumps } from '../loggers/generation-dump-node.ts';
import { METRICS_FILE, Tracking } from '../loggers/tracking-node.ts';
import {
  checkpointProblem,
  checkpointsToResume,
  loadCheckpoint,
  markFinalValidationDone,
  saveCheckpoint,
  type ResumedRun,
} from '../run-directory/checkpoint-node.ts';
import {
  claimRunDirectory,
  setAsideUnreadableCheckpoints,
  startRunHistory,
  type UnreadableCheckpoint,
} from '../run-directory/run-directory-node.ts';
import { checkRunLockFree } from '../run-directory/run-lock-node.ts';
import { PpoTrainer } from '../trainer.ts';
import { guardStep, NonFiniteError } from '../training/finite-guard.ts';
import { runTrainerIo } from './builtin-run.ts';
import { deviceMemory, formatMemoryPlan, parameterCount, planMemory, promptSetOf } from './memory-plan.ts';
import { assertResumable, setUpRun, type RunSetup } from './ppo-setup-node.ts';
import { runTrainingLoop, stopError, type SavePoint, type ValidationPoint } from './ppo-run-loop.ts';
import { formatStepLine, validationProgress } from './progress.ts';
import { rolloutServers } from './remote-generation-node.ts';
import type { ServerRollout } from '../generation/remote/remote-generation.ts';
import {
  interruptedLine,
  signalExitCode,
  stopOnSignalDuringSetup,
  watchStopSignals,
  type StopWatch,
} from './stop-signals-node.ts';

export interface PpoRunOptions {
  /** Environment for TENSORBOARD_DIR and the trackers. */
  env: Readonly<Record<string, string | undefined>>;
  /** Writes the charts of a run directory's metrics.jsonl; returns the files written, the page last. */
  writeCharts?: (runDir: string) => string[];
  /** The command that resumes this run from its newest checkpoint (named in the error a stopped run ends with). */
  resumeCommand: string;
}

export class PpoRun {
  // The run as given: trainer.default_local_dir, and whether trainer.logger prints to the console.
  private readonly runDir: string;
  private readonly toConsole: boolean;
  private readonly started = performance.now();

  // Resume (findCheckpointToResume): the newest intact checkpoint, what it holds, the unreadable ones newer than it.
  private resumeDir: string | null = null;
  private resumed: ResumedRun | null = null;
  private readonly unreadable: UnreadableCheckpoint[] = [];

  // The inputs (readInputs): models, tokenizer, data and reward, and the run's length in steps.
  private setup!: RunSetup;
  private sampler!: PromptSampler;
  private totalSteps = 0;

  // The run once it owns its directory (claimRunDirectory, createTrainer). `trainer` stays undefined until
  // createTrainer, which a stop signal during setup allows for.
  private stop!: StopWatch;
  private releaseLock = () => {};
  private tracking!: Tracking;
  private trainer!: PpoTrainer;
  /** actor_rollout_ref.rollout.server_urls' pool, connected before the run directory is claimed. */
  private servers: ServerRollout | null = null;
  /** The memory plan's budget for the rollout, which the trainer gives it. */
  private rolloutBudgetBytes: number | null = null;
  /** The plan keeps the rollout's half copy of a frozen LoRA base between rollouts. */
  private keepsRolloutCopy = false;
  /** The data position now (past the batches drawn, a failed step's included). */
  private cursor!: () => DataCursor;

  // Progress: what a checkpoint holds and what the next one records.
  /** The newest checkpoint of this run (the resumed one until this run saves). */
  private lastCheckpoint: string | null = null;
  /** The step of the last checkpoint this run wrote (a resumed run's starting checkpoint counts: it is that step). */
  private lastSavedStep = -1;
  /** The data position at the end of the last completed step: what a checkpoint records, even after a failed step
   *  drew its batch. */
  private completedCursor: DataCursor = { epoch: 0, index: 0 };
  /** Validation scores before PPO (trainer.val_before_train) and of the last validation (null: none ran). */
  private scoreBefore: number | null = null;
  private scoreAfter: number | null = null;

  constructor(
    private readonly engine: Engine,
    private readonly config: PpoConfig,
    private readonly options: PpoRunOptions,
  ) {
    this.runDir = resolve(config.trainer.default_local_dir);
    this.toConsole = config.trainer.logger.includes('console');
  }

  // trainer.logger's console sink is the run's progress on stdout (device, memory plan, a line per step and
  // validation, the summary); notes and errors reach stderr whatever trainer.logger says, so a run logging only to
  // wandb or a file is never silent about what it skipped or why it stopped.
  private log(line: string): void {
    if (this.toConsole) console.log(line);
  }

  private warn(line: string): void {
    console.error(line);
  }

  /** The run from its notes to its exit code. */
  async run(notes: readonly string[]): Promise<number> {
    const { config } = this;
    for (const note of [...notes, Tracking.skippedServicesNote(config), ...trainedModelDtypeNotes(config)])
      if (note) this.warn(note);
    await checkRunLockFree(this.runDir);
    await this.findCheckpointToResume();
    this.log(`device: ${describeDevice(this.engine.caps, this.engine.knobs)}`);
    if (this.resumed) this.log(`resuming from ${this.resumeDir} (step ${this.resumed.snapshot.state.globalStep})`);
    await this.readInputs();
    this.stop = watchStopSignals(() => ({
      step: this.trainer?.globalStep ?? this.resumed?.snapshot.state.globalStep ?? 0,
      lastCheckpoint: this.lastCheckpoint,
    }));
    try {
      await this.connectRolloutServers();
      await this.claimRunDirectory();
      this.printMemoryPlan();
      this.createTrainer();
      if (config.trainer.val_only) return await this.validateOnly();
      if (this.trainer.globalStep >= this.totalSteps) return await this.finishTrainedRun();
      return await this.fit();
    } finally {
      this.stop.dispose();
      this.releaseLock();
    }
  }

  /** The newest checkpoint that is whole; unreadable ones are moved aside once the run directory may be written
   *  (claimRunDirectory). */
  private async findCheckpointToResume(): Promise<void> {
    const { config } = this;
    for (const dir of await checkpointsToResume(config, this.runDir)) {
      const problem = await checkpointProblem(dir);
      if (problem === null) {
        this.resumeDir = dir;
        break;
      }
      if (config.trainer.resume_mode === 'resume_path')
        throw new CheckpointError(`trainer.resume_from_path=${dir} cannot be resumed: ${problem}`);
      this.unreadable.push({ dir, problem });
    }
    if (!this.resumeDir) return;
    this.resumed = await loadCheckpoint(this.engine, this.resumeDir, config);
    await assertResumable(config, this.resumeDir, this.resumed.actor.config);
    this.lastCheckpoint = this.resumeDir;
    this.lastSavedStep = this.resumed.snapshot.state.globalStep;
  }

  /** Every input (model, tokenizer, data, reward function), read before the run directory is written. */
  private async readInputs(): Promise<void> {
    const { config, resumed } = this;
    const stopWatchingSetup = stopOnSignalDuringSetup(
      resumed || config.actor_rollout_ref.model.path !== null ? 'setup' : 'setup and the warm start',
    );
    // A stage's first step is printed too: a stage that ends by its loss (pretraining) shows where it ended.
    let lastStage = '';
    this.setup = await setUpRun(this.engine, config, resumed, (r, { stage, totalSteps }) => {
      const firstOfStage = stage !== lastStage;
      lastStage = stage;
      if (r.step === 1 || r.step % 25 === 0 || firstOfStage) {
        this.log(
          `warm start (${stage}) step ${r.step}/${totalSteps}: loss ${r.loss.toFixed(4)}, ` +
            `${Math.round(r.tokensPerSecond)} tokens/s`,
        );
      }
    });
    for (const note of this.setup.notes) this.warn(note);
    this.sampler = PromptSampler.fromConfig(this.setup.train.length, config.data);
    this.totalSteps = totalTrainingSteps(this.sampler, config.trainer);
    stopWatchingSetup();
  }

  /**
   * Only now that every input has loaded: the run directory must be writable and ours alone, a dead save's staging
   * folder goes, a resumed run continues its metrics from the resumed step, a fresh one moves a previous run aside
   * (never deletes), and unreadable checkpoints are moved aside too.
   */
  private async claimRunDirectory(): Promise<void> {
    const { config, runDir, resumeDir, resumed } = this;
    const warn = (line: string) => this.warn(line);
    this.releaseLock = await claimRunDirectory(runDir, warn);
    await setAsideUnreadableCheckpoints(this.unreadable, resumeDir, warn);
    await startRunHistory(runDir, resumed?.snapshot.state.globalStep ?? null, warn);
    await writeFile(join(runDir, 'config.yaml'), configToYaml(config));
    this.tracking = await Tracking.open(config, runDir, resumed !== null, this.options.env);
    if (this.tracking.tensorboardFile) this.log(`tensorboard: ${this.tracking.tensorboardFile}`);
  }

  /** The memory plan of the models, and with LoRA what trains. */
  private printMemoryPlan(): void {
    const { config, setup } = this;
    const models = {
      actor: setup.actor.config,
      critic: setup.critic?.config ?? null,
      rewardModel: setup.rewardModel?.config ?? null,
      actorLora: setup.actor.lora?.settings ?? null,
    };
    const prompts = { training: promptSetOf(setup.train), validation: promptSetOf(setup.val) };
    const plan = planMemory(config, models, deviceMemory(this.engine), prompts);
    this.rolloutBudgetBytes = plan.rolloutBudgetBytes;
    this.keepsRolloutCopy = plan.keepsRolloutCopy;
    for (const line of formatMemoryPlan(plan, false)) this.log(line);
    const lora = setup.actor.lora;
    if (lora) {
      // As PEFT's print_trainable_parameters, which verl's LoRA runs print.
      const s = lora.settings;
      this.log(
        `LoRA r=${s.rank}, lora_alpha ${s.alpha} on ${s.targetModules.join(', ')}: ` +
          `${loraParameterCount(setup.actor.config, s).toLocaleString('en-US')} trainable ` +
          `parameters of ${parameterCount(setup.actor.config).toLocaleString('en-US')} (the base model frozen)`,
      );
    }
  }

  /** The trainer over the run's inputs, with its rollout servers, at the resumed checkpoint's state. */
  private createTrainer(): void {
    const { config, setup, resumed } = this;
    const { io, cursor } = runTrainerIo(setup, this.sampler, resumed?.dataCursor);
    this.cursor = cursor;
    const ppo = new PpoTrainer(
      this.engine,
      config,
      setup.actor,
      setup.critic,
      io,
      this.totalSteps,
      resumed?.reference ?? setup.reference,
      setup.rewardModel,
      setup.teachers,
    );
    this.trainer = ppo;
    ppo.generationDumps = generationDumps(config.trainer);
    if (this.rolloutBudgetBytes !== null) ppo.useRolloutBudget(this.rolloutBudgetBytes);
    if (this.keepsRolloutCopy) ppo.keepFrozenRolloutCopy();
    if (this.servers) ppo.useRolloutServers(this.servers);
    if (resumed) ppo.restore(resumed.snapshot);
  }

  /**
   * The rollout servers, asked who they are before the run directory is touched: a server that is down or serves
   * another backend stops the run with nothing of it written (a fresh start has not yet moved the previous run aside).
   */
  private async connectRolloutServers(): Promise<void> {
    const { config, setup } = this;
    if (!usesRolloutServers(config)) return;
    this.servers = rolloutServers(
      this.engine,
      config,
      setup.actor,
      setup.tokenizerFiles,
      setup.generationConfig?.raw,
      (line) => this.warn(line),
      this.stop.aborted,
    );
    await this.servers.connect();
  }

  /** trainer.val_only: validates the model (a resumed checkpoint's, or the starting one) and trains nothing. */
  private async validateOnly(): Promise<number> {
    this.stop.phase = 'final-validation';
    if (this.resumed) this.log(`validating the checkpoint ${this.resumeDir} (trainer.val_only=true)`);
    const score = await this.validate();
    if (score === null) {
      this.warn('error: trainer.val_only=true but there is no validation set (data.val_files)');
      return 1;
    }
    this.log(`validation only: score ${score.toFixed(3)}`);
    return 0;
  }

  /** A run resumed at its last step: nothing to train, or only the final validation, when it did not finish. */
  private async finishTrainedRun(): Promise<number> {
    const { config, resumed, runDir } = this;
    const step = this.trainer.globalStep;
    if (resumed?.finalValidationDone !== false || config.trainer.test_freq <= 0) {
      this.warn(
        `nothing to train: the run in ${runDir} is already at step ${step} of ${this.totalSteps} ` +
          `(trainer.resume_mode=${config.trainer.resume_mode}); pass trainer.resume_mode=disable to start over`,
      );
      return 0;
    }
    this.warn(
      `the run in ${runDir} is trained (step ${step} of ${this.totalSteps}) but its final validation did not ` +
        `finish: running it now`,
    );
    const score = await this.finalValidation();
    this.log(
      `done: final validation${score === null ? '' : ` score ${score.toFixed(3)}`}; checkpoint ${this.lastCheckpoint}`,
    );
    return 0;
  }

  /** verl's fit: the validation before training, the loop (ppo-run-loop.ts) with this run's hooks, the summary. */
  private async fit(): Promise<number> {
    const { config, setup } = this;
    const ppo = this.trainer;
    this.scoreBefore = config.trainer.val_before_train && !this.resumed ? await this.validate() : null;
    this.log(
      `PPO: ${this.totalSteps} steps × ${config.data.train_batch_size} prompts × ${config.actor_rollout_ref.rollout.n} ` +
        `samples, ` +
        `estimator ${config.algorithm.adv_estimator}${setup.critic ? (config.critic.freeze ? ' (critic frozen)' : ' with critic') : ''}`,
    );
    const ppoStarted = performance.now();
    const firstStep = ppo.globalStep;
    this.completedCursor = this.cursor();
    const end = await runTrainingLoop(ppo, this.totalSteps, config.trainer, {
      step: () => this.step(firstStep, ppoStarted),
      // The final validation runs after the final save, so one that fails (a bad val_files row, a reward or
      // retriever error) can name the checkpoint holding the trained weights.
      validate: (at) => this.validateAt(at),
      save: (at) => this.saveCheckpoint(at),
      stop: this.stop,
      canSaveAfter: (err) => !(err instanceof NonFiniteError) && ppo.atStepBoundary,
      describeStop: (err, saved) =>
        stopError(
          err,
          saved,
          ppo.globalStep,
          this.lastCheckpoint,
          (dir) => `${dir} — resume with: ${this.options.resumeCommand}`,
        ),
    });
    if (end === 'interrupted') {
      this.warn(interruptedLine(this.stop.signal!, ppo.globalStep, this.lastCheckpoint));
      return signalExitCode(this.stop.signal!);
    }
    this.summary();
    return 0;
  }

  /** One PPO step (the non-finite guard around it), its metrics to the trackers and its line. */
  private async step(firstStep: number, ppoStarted: number): Promise<void> {
    const ppo = this.trainer;
    const epoch = this.completedCursor.epoch;
    const metrics = await guardStep(ppo.globalStep + 1, this.lastCheckpoint, () => ppo.step());
    this.completedCursor = this.cursor();
    // verl's perf/cpu_memory_used_gb, as this process's resident set (verl reports the machine's used memory).
    await this.tracking.log(ppo.globalStep, {
      ...metrics,
      'training/epoch': epoch,
      'perf/cpu_memory_used_gb': process.memoryUsage().rss / 2 ** 30,
    });
    this.log(formatStepLine(metrics, this.totalSteps, firstStep, (performance.now() - ppoStarted) / 1000));
  }

  /** verl's _save_checkpoint: the last completed step, with the data position after it. */
  private async saveCheckpoint(at: SavePoint): Promise<void> {
    const { setup } = this;
    this.lastCheckpoint = await saveCheckpoint(
      this.engine,
      this.runDir,
      this.trainer,
      setup.tokenizerFiles,
      this.completedCursor,
      {
        generationConfig: setup.generationConfig?.raw,
        beforeRename: () => (this.stop.phase = 'renaming-checkpoint'),
      },
    );
    this.lastSavedStep = this.trainer.globalStep;
    if (at === 'save_freq') this.log(`checkpoint: ${this.lastCheckpoint}`);
  }

  /** The loop's validations: every trainer.test_freq steps, and the final one. */
  private async validateAt(at: ValidationPoint): Promise<void> {
    this.scoreAfter = at === 'final' ? await this.finalValidation() : await this.validate();
  }

  /** verl's _validate: the validation set's score (null: no validation set), logged with a few generations. */
  private async validate(): Promise<number | null> {
    const { config, setup } = this;
    const ppo = this.trainer;
    if (setup.val.length === 0) return null;
    // On stderr, so a run's stdout keeps one line per step and validation.
    const { metrics, samples } = await ppo.validate(
      this.toConsole ? validationProgress((line) => process.stderr.write(`${line}\n`)) : undefined,
    );
    await this.tracking.log(ppo.globalStep, { 'training/global_step': ppo.globalStep, ...metrics });
    const score = metrics['val/test_score/mean'];
    this.log(
      `validation @ step ${ppo.globalStep}: score ${score.toFixed(3)} on ${setup.val.length} prompts ` +
        `in ${metrics['timing_s/testing'].toFixed(1)}s (${metrics['val/response_tokens_per_s'].toFixed(0)} ` +
        `generated tok/s)` +
        `  e.g. ${samples
          .slice(0, 3)
          .map((s) => JSON.stringify(s.response))
          .join(', ')}`,
    );
    const generations = await Promise.all(
      samples.slice(0, config.trainer.log_val_generations).map(async (sample) => ({
        input: await setup.tokenizer.decode(sample.prompt),
        output: sample.response,
        score: sample.score,
      })),
    );
    for (const g of generations)
      this.log(`  [prompt] ${JSON.stringify(g.input)} [response] ${JSON.stringify(g.output)} [score] ${g.score}`);
    await this.tracking.logGenerations(ppo.globalStep, generations);
    return score;
  }

  /**
   * The validation that ends a run, recorded in its last checkpoint once it finished: the same command then has
   * nothing left to do.
   */
  private async finalValidation(): Promise<number | null> {
    this.stop.phase = 'final-validation';
    const step = this.trainer.globalStep;
    const saved = this.lastSavedStep === step;
    const score = await this.validate().catch((err: Error) => {
      const where = saved
        ? `the trained model is saved in ${this.lastCheckpoint}; the same command runs the final validation again`
        : `trainer.save_freq=${this.config.trainer.save_freq} saved no checkpoint of step ${step}`;
      throw new Error(`final validation failed (${where}): ${err.message}`, { cause: err });
    });
    if (saved) await markFinalValidationDone(this.lastCheckpoint!);
    return score;
  }

  /** The run's last lines: the score before and after, the time, the checkpoint, the metrics file and the charts. */
  private summary(): void {
    const { config, runDir, scoreBefore: before, scoreAfter: after } = this;
    const step = this.trainer.globalStep;
    const seconds = (performance.now() - this.started) / 1000;
    this.log('');
    if (before !== null && after !== null) {
      this.log(
        `validation score: ${before.toFixed(3)} before PPO -> ${after.toFixed(3)} after ` +
          `(${((after - before) * 100).toFixed(1)} points)`,
      );
    }
    const metricsNote = config.trainer.logger.includes('file') ? `; metrics ${join(runDir, METRICS_FILE)}` : '';
    const checkpointNote =
      this.lastSavedStep === step
        ? `checkpoint ${this.lastCheckpoint}`
        : `no checkpoint of step ${step} (trainer.save_freq=${config.trainer.save_freq})`;
    this.log(`done in ${seconds.toFixed(0)} s; ${checkpointNote}${metricsNote}`);
    // Charts are drawn from metrics.jsonl, which only the file logger writes.
    if (this.options.writeCharts && config.trainer.logger.includes('file')) {
      const files = this.options.writeCharts(runDir);
      this.log(`charts: ${files[files.length - 1]} (${files.length - 1} PNG beside it)`);
    }
  }
}
