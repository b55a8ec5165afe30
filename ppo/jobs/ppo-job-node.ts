// Node command line of the trainer: `node train.js [--config run.yaml | --config-path=DIR --config-name=NAME] [--cfg
// job] [key.sub=value ...]`, a verl launch script's arguments as written. Layers, later winning: verl's defaults, the
// built-in job (examples/arithmetic_tiny.yaml, only when no config file is named and neither a model nor data is
// given), a --config file or Hydra's primary config with its defaults list, the command line. `--cfg job` prints the
// composed config and exits before any device is created. A run validates every input before it touches the run
// directory (trainer.default_local_dir), writes the resolved config there as config.yaml, prints a line per step, logs
// to trainer.logger's sinks, validates every trainer.test_freq steps and saves every trainer.save_freq steps (the last
// step included; ≤ 0: never, as in verl), and, given a chart writer (train.js passes tools/plot's), draws the run's
// charts.
import { readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { totalmem } from 'node:os';
import { Engine, readKnobs, type EngineKnobs } from '../../engine/index.ts';
import { HfConfigError } from '../../models/hf-config.ts';
import { TokenizerError } from '../../models/tokenizer.ts';
import { ChatTemplateError } from '../../models/chat-template.ts';
import { SafetensorsError } from '../../models/safetensors.ts';
import { CheckpointError } from '../../models/checkpoint-io-node.ts';
import {
  composeConfig,
  configToYaml,
  formatHelp,
  ConfigError,
  trainedModelDtypeNotes,
  usesRolloutServers,
  type ConfigLayer,
  type PpoConfig,
} from '../config.ts';
import { DEFAULT_JOB } from '../tasks/default-job.ts';
import { setUpRun, assertResumable, checkModelDirectories } from './ppo-setup-node.ts';
import { runTrainerIo } from './builtin-run.ts';
import { PpoTrainer } from '../trainer.ts';
import { PromptSampler, totalTrainingSteps } from '../data/dataset.ts';
import { formatStepLine, validationProgress } from './progress.ts';
import {
  saveCheckpoint,
  checkpointsToResume,
  checkpointProblem,
  loadCheckpoint,
  markFinalValidationDone,
} from '../run-directory/checkpoint-node.ts';
import { Tracking, METRICS_FILE } from '../loggers/tracking-node.ts';
import { planMemory, formatMemoryPlan, deviceMemory, parameterCount } from './memory-plan.ts';
import { loraParameterCount } from '../../models/lora.ts';
import { guardStep, NonFiniteError } from '../training/finite-guard.ts';
import {
  claimRunDirectory,
  setAsideUnreadableCheckpoints,
  type UnreadableCheckpoint,
  startRunHistory,
} from '../run-directory/run-directory-node.ts';
import { checkRunLockFree } from '../run-directory/run-lock-node.ts';
import { watchStopSignals, stopOnSignalDuringSetup, signalExitCode, interruptedLine } from './stop-signals-node.ts';
import { runTrainingLoop, stopError } from './ppo-run-loop.ts';
import { readPrimaryConfig, VERL_PRIMARY_CONFIG } from '../config/primary-config-node.ts';
import { generationDumps } from '../loggers/generation-dump-node.ts';
import { rolloutServers } from './remote-generation-node.ts';

const INPUT_ERRORS = [HfConfigError, TokenizerError, ChatTemplateError, SafetensorsError, CheckpointError];

const USAGE =
  'usage: node train.js [--config run.yaml | --config-path=DIR --config-name=NAME] [--cfg job] [key.sub=value ...]   ' +
  '(node train.js --help lists every key)';

interface Args {
  configFile: string | null;
  /** Hydra's --config-path / -cp: the folder of the primary config. */
  configPath: string | null;
  /** Hydra's --config-name / -cn: the primary config, NAME.yaml in configPath (verl's ppo_trainer without one). */
  configName: string | null;
  overrides: string[];
  help: boolean;
  /** Hydra's --cfg job: print the composed config and exit. */
  printConfig: boolean;
}

function parseArgs(argv: string[]): Args {
  const args: Args = {
    configFile: null,
    configPath: null,
    configName: null,
    overrides: [],
    help: false,
    printConfig: false,
  };
  const value = (i: number, option: string) => {
    if (i >= argv.length) throw new ConfigError([`${option} needs a value (${USAGE})`]);
    return argv[i];
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--help' || arg === '-h') args.help = true;
    else if (arg === '--config' || arg.startsWith('--config=')) {
      const file = arg === '--config' ? value(++i, '--config') : arg.slice('--config='.length);
      // Hydra composes one primary config; a second --config silently winning would hide the first.
      if (args.configFile !== null)
        throw new ConfigError([
          `--config given twice (${args.configFile} and ${file}): give one file, and override its keys as ` +
            `key.sub=value`,
        ]);
      args.configFile = file;
    } else if (/^(--config-path|-cp|--config-name|-cn)(=|$)/.test(arg)) {
      const eq = arg.indexOf('=');
      const option = eq < 0 ? arg : arg.slice(0, eq);
      const given = eq < 0 ? value(++i, option) : arg.slice(eq + 1);
      if (option === '--config-path' || option === '-cp') args.configPath = given;
      else args.configName = given;
    } else if (arg === '--cfg' || arg === '-c' || arg.startsWith('--cfg=')) {
      const what = arg.startsWith('--cfg=') ? arg.slice('--cfg='.length) : value(++i, arg);
      if (what !== 'job')
        throw new ConfigError([
          `${arg} ${what}: only --cfg job is supported (the composed config; there is no Hydra config of its own here)`,
        ]);
      args.printConfig = true;
    } else if (arg.startsWith('-')) throw new ConfigError([`unknown option ${arg} (${USAGE})`]);
    else args.overrides.push(arg);
  }
  if (args.configFile !== null && (args.configPath !== null || args.configName !== null)) {
    throw new ConfigError([
      `--config ${args.configFile} and Hydra's ` +
        `${args.configName !== null ? `--config-name ${args.configName}` : `--config-path ${args.configPath}`} both ` +
        `name the primary config: give one`,
    ]);
  }
  // Hydra with a folder and no name reads main_ppo's config_name there: ppo_trainer.
  if (args.configPath !== null && args.configName === null) args.configName = VERL_PRIMARY_CONFIG;
  return args;
}

/** Keys that make a run the user's own rather than the built-in job. */
const USER_RUN_KEYS = new Set(['actor_rollout_ref.model.path', 'data.train_files']);

/** The built-in job's layer applies when no config file is named and the command line sets no model and no data. */
function isBuiltinJob(args: Args): boolean {
  return (
    args.configFile === null &&
    args.configName === null &&
    !args.overrides.some((o) =>
      USER_RUN_KEYS.has(
        o
          .slice(0, Math.max(0, o.indexOf('=')))
          .trim()
          .replace(/^\+\+?/, ''),
      ),
    )
  );
}

async function readLayers(args: Args): Promise<{ layers: ConfigLayer[]; notes: string[] }> {
  if (args.configName !== null) return readPrimaryConfig(args.configPath, args.configName);
  if (args.configFile === null) return { layers: isBuiltinJob(args) ? [DEFAULT_JOB] : [], notes: [] };
  try {
    return { layers: [{ text: await readFile(args.configFile, 'utf8'), source: args.configFile }], notes: [] };
  } catch (err) {
    throw new ConfigError([`--config ${args.configFile}: cannot read it (${(err as Error).message})`]);
  }
}

/** verl's batch sizes are global, so a script written for a cluster runs the same math here on one adapter. */
function checkOneAdapter(config: PpoConfig): void {
  const { n_gpus_per_node: gpus, nnodes } = config.trainer;
  if (gpus * nnodes !== 1) {
    throw new ConfigError([
      `trainer.n_gpus_per_node=${gpus} × trainer.nnodes=${nnodes} cannot be honoured: this engine trains on one ` +
        `WebGPU adapter — ` +
        'set trainer.n_gpus_per_node=1 trainer.nnodes=1 (batch sizes are global in verl, so the run computes the ' +
        'same thing)',
    ]);
  }
}

export interface MainOptions {
  /** Writes the charts of a run directory's metrics.jsonl; returns the files written, the page last. */
  writeCharts?: (runDir: string) => string[];
  /** Environment for ${oc.env:VAR} and TENSORBOARD_DIR (default process.env). */
  env?: Readonly<Record<string, string | undefined>>;
  /** The engine's knobs (default: from process.env), e.g. to run two device classes in one process. */
  knobs?: EngineKnobs;
}

export async function main(argv: string[], options: MainOptions = {}): Promise<number> {
  const env = options.env ?? process.env;
  let config: PpoConfig;
  let notes: string[];
  try {
    const args = parseArgs(argv);
    if (args.help) {
      console.log(`${USAGE}\n\n${formatHelp(DEFAULT_JOB)}`);
      return 0;
    }
    const primary = await readLayers(args);
    ({ config, notes } = composeConfig({ layers: primary.layers, overrides: args.overrides, env }));
    notes = [...primary.notes, ...notes];
    if (args.printConfig) {
      for (const note of notes) console.error(`# ${note}`);
      process.stdout.write(configToYaml(config));
      return 0;
    }
    checkOneAdapter(config);
    const missing = await checkModelDirectories(config);
    if (missing.length > 0) throw new ConfigError(missing);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(
        err.problems.length === 1
          ? `configuration error: ${err.problems[0]}`
          : `configuration error:\n${err.problems.map((p) => `  - ${p}`).join('\n')}`,
      );
      return 2;
    }
    throw err;
  }
  // A bad environment knob (WEBGPU_DEVICE_MEMORY=lots) throws here: runMain makes it one line, no stack.
  const engine = await Engine.create(options.knobs ?? readKnobs(), totalmem());
  try {
    return await train(engine, config, notes, env, options, resumeCommand(argv, config));
  } catch (err) {
    // A model, tokenizer or checkpoint the engine cannot read is the user's input, not a bug: one line, no stack.
    if (INPUT_ERRORS.some((kind) => err instanceof kind)) {
      console.error(`error: ${(err as Error).message}`);
      return 1;
    }
    throw err;
  } finally {
    await engine.sync();
    engine.destroy();
  }
}

/** The command that resumes this run from its newest checkpoint: the same one, made to auto-resume if it did not. */
function resumeCommand(argv: string[], config: PpoConfig): string {
  const quote = (arg: string) => (/^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`);
  const extra =
    config.trainer.resume_mode === 'auto'
      ? []
      : [
          'trainer.resume_mode=auto',
          ...(config.trainer.resume_from_path !== null ? ['trainer.resume_from_path=null'] : []),
        ];
  return ['node', 'train.js', ...argv, ...extra].map(quote).join(' ');
}

/** What the run stopped by an error says last: whether its completed steps were saved, and how to go on. */
async function train(
  engine: Engine,
  config: PpoConfig,
  notes: string[],
  env: Readonly<Record<string, string | undefined>>,
  options: MainOptions,
  command: string,
): Promise<number> {
  const started = performance.now();
  const runDir = resolve(config.trainer.default_local_dir);
  // trainer.logger's console sink is the run's progress on stdout (device, memory plan, a line per step and
  // validation, the summary); notes and errors reach stderr whatever trainer.logger says, so a run logging only to
  // wandb or a file is never silent about what it skipped or why it stopped.
  const toConsole = config.trainer.logger.includes('console');
  const log = (line: string) => toConsole && console.log(line);
  const warn = (line: string) => console.error(line);
  for (const note of [...notes, Tracking.skippedServicesNote(config), ...trainedModelDtypeNotes(config)])
    if (note) warn(note);
  await checkRunLockFree(runDir);

  // The newest checkpoint that is whole; unreadable ones are moved aside once the run directory may be written.
  const unreadable: UnreadableCheckpoint[] = [];
  let resumeDir: string | null = null;
  for (const dir of await checkpointsToResume(config, runDir)) {
    const problem = await checkpointProblem(dir);
    if (problem === null) {
      resumeDir = dir;
      break;
    }
    if (config.trainer.resume_mode === 'resume_path')
      throw new CheckpointError(`trainer.resume_from_path=${dir} cannot be resumed: ${problem}`);
    unreadable.push({ dir, problem });
  }
  const resumed = resumeDir ? await loadCheckpoint(engine, resumeDir, config) : null;
  if (resumeDir && resumed) await assertResumable(config, resumeDir, resumed.actor.config);
  log(
    `device: ${engine.caps.description} (${engine.caps.deviceClass} ` +
      `kernels${engine.knobs.deviceClass ? ', WEBGPU_DEVICE_CLASS' : ''})`,
  );
  if (resumed) log(`resuming from ${resumeDir} (step ${resumed.snapshot.state.globalStep})`);
  // Every input (model, tokenizer, data, reward function) is read before the run directory is written.
  const stopWatchingSetup = stopOnSignalDuringSetup(
    resumed || config.actor_rollout_ref.model.path !== null ? 'setup' : 'setup and the warm start',
  );
  const setup = await setUpRun(engine, config, resumed, (r, { stage, totalSteps }) => {
    if (r.step === 1 || r.step % 25 === 0 || r.step === totalSteps) {
      log(
        `warm start (${stage}) step ${r.step}/${totalSteps}: loss ${r.loss.toFixed(4)}, ` +
          `${Math.round(r.tokensPerSecond)} tokens/s`,
      );
    }
  });
  for (const note of setup.notes) warn(note);
  const sampler = PromptSampler.fromConfig(setup.train.length, config.data);
  const totalSteps = totalTrainingSteps(sampler, config.trainer);
  stopWatchingSetup();

  let trainer: PpoTrainer | null = null;
  let lastCheckpoint = resumeDir;
  /** The step of the last checkpoint this run wrote (a resumed run's starting checkpoint counts: it is that step). */
  let lastSavedStep = resumed?.snapshot.state.globalStep ?? -1;
  const stop = watchStopSignals(() => ({
    step: trainer?.globalStep ?? resumed?.snapshot.state.globalStep ?? 0,
    lastCheckpoint,
  }));
  let releaseLock = () => {};
  try {
    // Only now that every input has loaded: the run directory must be writable and ours alone, a dead save's staging
    // folder goes, a resumed run continues its metrics from the resumed step, a fresh one moves a previous run aside
    // (never deletes), and unreadable checkpoints are moved aside too.
    releaseLock = await claimRunDirectory(runDir, warn);
    await setAsideUnreadableCheckpoints(unreadable, resumeDir, warn);
    await startRunHistory(runDir, resumed?.snapshot.state.globalStep ?? null, warn);
    await writeFile(join(runDir, 'config.yaml'), configToYaml(config));
    const tracking = await Tracking.open(config, runDir, resumed !== null, env);
    if (tracking.tensorboardFile) log(`tensorboard: ${tracking.tensorboardFile}`);
    const models = {
      actor: setup.actor.config,
      critic: setup.critic?.config ?? null,
      rewardModel: setup.rewardModel?.config ?? null,
      actorLora: setup.actor.lora?.settings ?? null,
    };
    for (const line of formatMemoryPlan(planMemory(config, models, deviceMemory(engine), setup.val.length), false))
      log(line);
    const lora = setup.actor.lora;
    if (lora) {
      // As PEFT's print_trainable_parameters, which verl's LoRA runs print.
      const s = lora.settings;
      log(
        `LoRA r=${s.rank}, lora_alpha ${s.alpha} on ${s.targetModules.join(', ')}: ` +
          `${loraParameterCount(setup.actor.config, s).toLocaleString('en-US')} trainable ` +
          `parameters of ${parameterCount(setup.actor.config).toLocaleString('en-US')} (the base model frozen)`,
      );
    }

    const { io, cursor } = runTrainerIo(setup, sampler, resumed?.dataCursor);
    const ppo = new PpoTrainer(
      engine,
      config,
      setup.actor,
      setup.critic,
      io,
      totalSteps,
      resumed?.reference ?? null,
      setup.rewardModel,
    );
    trainer = ppo;
    ppo.generationDumps = generationDumps(config.trainer);
    if (usesRolloutServers(config)) {
      ppo.useRolloutServers(
        rolloutServers(engine, config, setup.actor, setup.tokenizerFiles, setup.generationConfig?.raw, warn),
      );
    }
    if (resumed) ppo.restore(resumed.snapshot);

    const validate = async (): Promise<number | null> => {
      if (setup.val.length === 0) return null;
      // On stderr, so a run's stdout keeps one line per step and validation.
      const { metrics, samples } = await ppo.validate(
        toConsole ? validationProgress((line) => process.stderr.write(`${line}\n`)) : undefined,
      );
      await tracking.log(ppo.globalStep, { 'training/global_step': ppo.globalStep, ...metrics });
      const score = metrics['val/test_score/mean'];
      log(
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
        log(`  [prompt] ${JSON.stringify(g.input)} [response] ${JSON.stringify(g.output)} [score] ${g.score}`);
      await tracking.logGenerations(ppo.globalStep, generations);
      return score;
    };
    /**
     * The validation that ends a run, recorded in its last checkpoint once it finished: the same command then has
     * nothing left to do.
     */
    const finalValidation = async (): Promise<number | null> => {
      stop.phase = 'final-validation';
      const saved = lastSavedStep === ppo.globalStep;
      const score = await validate().catch((err: Error) => {
        const where = saved
          ? `the trained model is saved in ${lastCheckpoint}; the same command runs the final validation again`
          : `trainer.save_freq=${config.trainer.save_freq} saved no checkpoint of step ${ppo.globalStep}`;
        throw new Error(`final validation failed (${where}): ${err.message}`, { cause: err });
      });
      if (saved) await markFinalValidationDone(lastCheckpoint!);
      return score;
    };

    if (config.trainer.val_only) {
      stop.phase = 'final-validation';
      if (resumed) log(`validating the checkpoint ${resumeDir} (trainer.val_only=true)`);
      const score = await validate();
      if (score === null) {
        warn('error: trainer.val_only=true but there is no validation set (data.val_files)');
        return 1;
      }
      log(`validation only: score ${score.toFixed(3)}`);
      return 0;
    }
    if (ppo.globalStep >= totalSteps) {
      if (resumed?.finalValidationDone !== false || config.trainer.test_freq <= 0) {
        warn(
          `nothing to train: the run in ${runDir} is already at step ${ppo.globalStep} of ${totalSteps} ` +
            `(trainer.resume_mode=${config.trainer.resume_mode}); pass trainer.resume_mode=disable to start over`,
        );
        return 0;
      }
      warn(
        `the run in ${runDir} is trained (step ${ppo.globalStep} of ${totalSteps}) but its final validation did not ` +
          `finish: running it now`,
      );
      const score = await finalValidation();
      log(`done: final validation${score === null ? '' : ` score ${score.toFixed(3)}`}; checkpoint ${lastCheckpoint}`);
      return 0;
    }
    const before = config.trainer.val_before_train && !resumed ? await validate() : null;
    log(
      `PPO: ${totalSteps} steps × ${config.data.train_batch_size} prompts × ${config.actor_rollout_ref.rollout.n} ` +
        `samples, ` +
        `estimator ${config.algorithm.adv_estimator}${setup.critic ? (config.critic.freeze ? ' (critic frozen)' : ' with critic') : ''}`,
    );
    // The last validation's score (assigned in the loop's hook): null when no validation followed the first step.
    let after = null as number | null;
    const ppoStarted = performance.now();
    const firstStep = ppo.globalStep;
    // The data position at the end of the last completed step: what a checkpoint records, even after a failed step drew
    // its batch.
    let completedCursor = cursor();
    const end = await runTrainingLoop(ppo, totalSteps, config.trainer, {
      step: async () => {
        const epoch = completedCursor.epoch;
        const metrics = await guardStep(ppo.globalStep + 1, lastCheckpoint, () => ppo.step());
        completedCursor = cursor();
        // verl's perf/cpu_memory_used_gb, as this process's resident set (verl reports the machine's used memory).
        await tracking.log(ppo.globalStep, {
          ...metrics,
          'training/epoch': epoch,
          'perf/cpu_memory_used_gb': process.memoryUsage().rss / 2 ** 30,
        });
        log(formatStepLine(metrics, totalSteps, firstStep, (performance.now() - ppoStarted) / 1000));
      },
      // The final validation runs after the final save, so one that fails (a bad val_files row, a reward or
      // retriever error) can name the checkpoint holding the trained weights.
      validate: async (at) => {
        after = at === 'final' ? await finalValidation() : await validate();
      },
      save: async (at) => {
        lastCheckpoint = await saveCheckpoint(engine, runDir, ppo, setup.tokenizerFiles, completedCursor, {
          generationConfig: setup.generationConfig?.raw,
          beforeRename: () => (stop.phase = 'renaming-checkpoint'),
        });
        lastSavedStep = ppo.globalStep;
        if (at === 'save_freq') log(`checkpoint: ${lastCheckpoint}`);
      },
      stop,
      canSaveAfter: (err) => !(err instanceof NonFiniteError) && ppo.atStepBoundary,
      describeStop: (err, saved) =>
        stopError(err, saved, ppo.globalStep, lastCheckpoint, (dir) => `${dir} — resume with: ${command}`),
    });
    if (end === 'interrupted') {
      warn(interruptedLine(stop.signal!, ppo.globalStep, lastCheckpoint));
      return signalExitCode(stop.signal!);
    }
    const seconds = (performance.now() - started) / 1000;
    log('');
    if (before !== null && after !== null) {
      log(
        `validation score: ${before.toFixed(3)} before PPO -> ${after.toFixed(3)} after ` +
          `(${((after - before) * 100).toFixed(1)} points)`,
      );
    }
    const metricsNote = config.trainer.logger.includes('file') ? `; metrics ${join(runDir, METRICS_FILE)}` : '';
    const checkpointNote =
      lastSavedStep === ppo.globalStep
        ? `checkpoint ${lastCheckpoint}`
        : `no checkpoint of step ${ppo.globalStep} (trainer.save_freq=${config.trainer.save_freq})`;
    log(`done in ${seconds.toFixed(0)} s; ${checkpointNote}${metricsNote}`);
    // Charts are drawn from metrics.jsonl, which only the file logger writes.
    if (options.writeCharts && config.trainer.logger.includes('file')) {
      const files = options.writeCharts(runDir);
      log(`charts: ${files[files.length - 1]} (${files.length - 1} PNG beside it)`);
    }
    return 0;
  } finally {
    stop.dispose();
    releaseLock();
  }
}
