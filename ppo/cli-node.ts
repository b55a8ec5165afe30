// Node command line of the trainer: `node train.js [--config run.yaml] [key.sub=value ...]`. Without --config it
// runs the embedded default job (ppo/tasks/default-job.ts). Prints a line per step, writes metrics.jsonl to the run
// directory (trainer.default_local_dir), validates every trainer.test_freq steps and at the end, and, given a
// chart writer (train.js passes tools/plot's), draws the run's charts when it is done.
import { readFile, appendFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { totalmem } from 'node:os';
import { Engine } from '../engine/index.ts';
import { loadConfig, formatHelp, ConfigError, type PpoConfig } from './config.ts';
import { DEFAULT_JOB_YAML } from './tasks/default-job.ts';
import { setUpRun } from './run-setup-node.ts';
import { runTrainerIo } from './run/builtin-run.ts';
import { PpoTrainer } from './trainer.ts';
import { PromptSampler, totalTrainingSteps } from './run/dataset.ts';
import { formatStepLine } from './run/progress.ts';
import { saveCheckpoint, checkpointToResume, loadCheckpoint } from './run/checkpoint-node.ts';
import { planMemory, formatMemoryPlan, deviceMemory } from './run/memory-plan.ts';
import { guardStep } from './phases/finite-guard.ts';
import { prepareRunDirectory, removeStaleSaves, setAsidePreviousRun, trimMetricsAfter, METRICS_FILE } from './run/run-directory-node.ts';
import { watchInterrupt, INTERRUPT_EXIT_CODE } from './run/interrupt.ts';
import { withFileContext } from './run/user-error.ts';

const USAGE = 'usage: node train.js [--config run.yaml] [key.sub=value ...]   (node train.js --help lists every key)';

function parseArgs(argv: string[]): { configFile: string | null; overrides: string[]; help: boolean } {
  let configFile: string | null = null;
  const overrides: string[] = [];
  let help = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--help' || arg === '-h') help = true;
    else if (arg === '--config') {
      if (i + 1 >= argv.length) throw new ConfigError([`--config needs a file name (${USAGE})`]);
      configFile = argv[++i];
    } else if (arg.startsWith('--config=')) configFile = arg.slice('--config='.length);
    else if (arg.startsWith('--')) throw new ConfigError([`unknown option ${arg} (${USAGE})`]);
    else overrides.push(arg);
  }
  return { configFile, overrides, help };
}

async function readConfig(configFile: string | null, overrides: string[]): Promise<PpoConfig> {
  if (configFile === null) return loadConfig({ yamlText: DEFAULT_JOB_YAML, yamlSource: 'the default job', overrides });
  let yamlText: string;
  try {
    yamlText = await readFile(configFile, 'utf8');
  } catch (err) {
    throw new ConfigError([`--config ${configFile}: cannot read it (${(err as Error).message})`]);
  }
  return loadConfig({ yamlText, yamlSource: configFile, overrides });
}

export interface MainOptions {
  /** Writes the charts of a run directory's metrics.jsonl; returns the files written, the page last. */
  writeCharts?: (runDir: string) => string[];
}

export async function main(argv: string[], options: MainOptions = {}): Promise<number> {
  let config: PpoConfig;
  try {
    const args = parseArgs(argv);
    if (args.help) {
      console.log(`${USAGE}\n\n${formatHelp()}`);
      return 0;
    }
    config = await readConfig(args.configFile, args.overrides);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`configuration error:\n${err.problems.map((p) => `  - ${p}`).join('\n')}`);
      return 2;
    }
    throw err;
  }
  const engine = await Engine.create();
  try {
    return await train(engine, config, options);
  } finally {
    await engine.sync();
    engine.destroy();
  }
}

async function train(engine: Engine, config: PpoConfig, options: MainOptions): Promise<number> {
  const started = performance.now();
  const runDir = resolve(config.trainer.default_local_dir);
  await prepareRunDirectory(runDir);
  const metricsFile = join(runDir, METRICS_FILE);
  const toConsole = config.trainer.logger.includes('console');
  const log = (line: string) => toConsole && console.log(line);
  for (const name of await removeStaleSaves(runDir)) log(`removed ${name}: the staging folder of a save that did not finish`);
  const resumeDir = await checkpointToResume(config, runDir);
  const resumed = resumeDir ? await loadCheckpoint(engine, resumeDir, config) : null;
  const record = async (metrics: Record<string, number>) => {
    if (config.trainer.logger.includes('file')) await withFileContext(`writing ${metricsFile}`, () => appendFile(metricsFile, JSON.stringify(metrics) + '\n'));
  };

  log(`device: ${engine.caps.description}`);
  if (resumed) log(`resuming from ${resumeDir} (step ${resumed.snapshot.state.globalStep})`);
  const setup = await setUpRun(engine, config, resumed, (r, { stage, totalSteps }) => {
    if (r.step === 1 || r.step % 25 === 0 || r.step === totalSteps) {
      log(`warm start (${stage}) step ${r.step}/${totalSteps}: loss ${r.loss.toFixed(4)}, ${Math.round(r.tokensPerSecond)} tokens/s`);
    }
  });
  const models = { actor: setup.actor.config, critic: setup.critic?.config ?? null, rewardModel: setup.rewardModel?.config ?? null };
  for (const line of formatMemoryPlan(planMemory(config, models, deviceMemory(engine, totalmem())), false)) log(line);
  // Only now that every input has loaded: a resumed run continues its metrics from the resumed step, a fresh
  // one moves a previous run's metrics and checkpoints aside (never deletes them).
  if (resumed) await trimMetricsAfter(metricsFile, resumed.snapshot.state.globalStep);
  else {
    const archive = await setAsidePreviousRun(runDir);
    if (archive) log(`fresh start: the previous run's metrics and checkpoints moved to ${archive}`);
  }
  const sampler = PromptSampler.fromConfig(setup.train.length, config.data);
  const totalSteps = totalTrainingSteps(sampler, config.trainer);
  const { io, cursor } = runTrainerIo(setup, sampler, resumed?.dataCursor);
  const trainer = new PpoTrainer(engine, config, setup.actor, setup.critic, io, totalSteps, resumed?.reference ?? null, setup.rewardModel);
  if (resumed) trainer.restore(resumed.snapshot);

  const validate = async (): Promise<number | null> => {
    if (setup.val.length === 0) return null;
    const { metrics, samples } = await trainer.validate();
    await record({ 'training/global_step': trainer.globalStep, ...metrics });
    const score = metrics['val/test_score/mean'];
    log(`validation @ step ${trainer.globalStep}: score ${score.toFixed(3)} on ${setup.val.length} prompts` +
      `  e.g. ${samples.slice(0, 3).map((s) => JSON.stringify(s.response)).join(', ')}`);
    return score;
  };

  const before = config.trainer.val_before_train && !resumed ? await validate() : null;
  log(`PPO: ${totalSteps} steps × ${config.data.train_batch_size} prompts × ${config.actor_rollout_ref.rollout.n} samples, ` +
    `estimator ${config.algorithm.adv_estimator}${setup.critic ? (config.critic.freeze ? ' (critic frozen)' : ' with critic') : ''}`);
  if (trainer.globalStep >= totalSteps) {
    log(`nothing to train: the run in ${runDir} is already at step ${trainer.globalStep} of ${totalSteps} ` +
      `(trainer.resume_mode=${config.trainer.resume_mode}); pass trainer.resume_mode=disable to start over`);
    return 0;
  }
  let after = before;
  let savedStep = -1;
  let lastCheckpoint = resumeDir;
  const ppoStarted = performance.now();
  const firstStep = trainer.globalStep;
  const interrupt = watchInterrupt(() => ({ step: trainer.globalStep, lastCheckpoint }));
  try {
    while (trainer.globalStep < totalSteps) {
      const metrics = await guardStep(trainer.globalStep + 1, lastCheckpoint, () => trainer.step());
      await record(metrics);
      log(formatStepLine(metrics, totalSteps, firstStep, (performance.now() - ppoStarted) / 1000));
      const step = trainer.globalStep;
      if (interrupt.requested) {
        const saved = await saveCheckpoint(engine, runDir, trainer, setup.tokenizerFiles, cursor());
        console.error(`interrupted after step ${step}: checkpoint ${saved}; the same command resumes from it`);
        return INTERRUPT_EXIT_CODE;
      }
      if (config.trainer.test_freq > 0 && step % config.trainer.test_freq === 0 && step < totalSteps) after = await validate();
      if (config.trainer.save_freq > 0 && step % config.trainer.save_freq === 0) {
        lastCheckpoint = await saveCheckpoint(engine, runDir, trainer, setup.tokenizerFiles, cursor());
        log(`checkpoint: ${lastCheckpoint}`);
        savedStep = step;
      }
    }
  } finally {
    interrupt.dispose();
  }
  // The final checkpoint before the final validation: a validation that fails (a bad val_files row, a reward or
  // retriever error) is reported with the trained weights already saved.
  const finalCheckpoint = savedStep === trainer.globalStep
    ? join(runDir, `global_step_${savedStep}`)
    : await saveCheckpoint(engine, runDir, trainer, setup.tokenizerFiles, cursor());
  after = await validate().catch((err: Error) => {
    throw new Error(`final validation failed (the trained model is saved in ${finalCheckpoint}): ${err.message}`, { cause: err });
  });
  const seconds = (performance.now() - started) / 1000;
  log('');
  if (before !== null && after !== null) {
    log(`validation score: ${before.toFixed(3)} before PPO -> ${after.toFixed(3)} after (${((after - before) * 100).toFixed(1)} points)`);
  }
  log(`done in ${seconds.toFixed(0)} s; checkpoint ${finalCheckpoint}; metrics ${metricsFile}`);
  if (options.writeCharts) {
    const files = options.writeCharts(runDir);
    log(`charts: ${files[files.length - 1]} (${files.length - 1} PNG beside it)`);
  }
  return 0;
}
