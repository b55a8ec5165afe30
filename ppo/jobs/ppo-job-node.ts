// Node command line of the trainer: `node train.js [--config run.yaml | --config-path=DIR --config-name=NAME] [--cfg
// job] [key.sub=value ...]`, a verl launch script's arguments as written. Layers, later winning: verl's defaults, the
// built-in job (examples/arithmetic_tiny.yaml, only when no config file is named and neither a model nor data is
// given), a --config file or Hydra's primary config with its defaults list, the command line. `--cfg job` prints the
// composed config and exits before any device is created. A run (ppo-run-node.ts) validates every input before it
// touches the run directory (trainer.default_local_dir), writes the resolved config there as config.yaml, prints a
// line per step, logs to trainer.logger's sinks, validates every trainer.test_freq steps and saves every
// trainer.save_freq steps (the last step included; ≤ 0: never, as in verl), and, given a chart writer (train.js passes
// tools/plot's), draws the run's charts.
import { readFile } from 'node:fs/promises';
import { totalmem } from 'node:os';
import { Engine, readKnobs, type EngineKnobs } from '../../engine/index.ts';
import { HfConfigError } from '../../models/hf-config.ts';
import { TokenizerError } from '../../models/tokenizer.ts';
import { ChatTemplateError } from '../../models/chat-template.ts';
import { SafetensorsError } from '../../models/safetensors.ts';
import { CheckpointError } from '../../models/checkpoint-io-node.ts';
import { composeConfig, configToYaml, formatHelp, ConfigError, type ConfigLayer, type PpoConfig } from '../config.ts';
import { DEFAULT_JOB } from '../tasks/default-job.ts';
import { checkModelDirectories } from './ppo-setup-node.ts';
import { distillationProblems } from '../algorithm/distillation.ts';
import { PpoRun } from './ppo-run-node.ts';
import { readPrimaryConfig, VERL_PRIMARY_CONFIG } from '../config/primary-config-node.ts';

const INPUT_ERRORS = [HfConfigError, TokenizerError, ChatTemplateError, SafetensorsError, CheckpointError];

const USAGE =
  'usage: node train.js [--config run.yaml | --config-path=DIR --config-name=NAME] [--cfg job] [key.sub=value ...]   ' +
  '(node train.js --help lists every key, --help SECTION those under one, e.g. --help algorithm)';

interface Args {
  configFile: string | null;
  /** Hydra's --config-path / -cp: the folder of the primary config. */
  configPath: string | null;
  /** Hydra's --config-name / -cn: the primary config, NAME.yaml in configPath (verl's ppo_trainer without one). */
  configName: string | null;
  overrides: string[];
  help: boolean;
  /** --help SECTION: the group of keys to list (all without one). */
  helpSection?: string;
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
    if (arg === '--help' || arg === '-h') {
      args.help = true;
      // A following word that is not an option or a key=value names the section.
      if (i + 1 < argv.length && !argv[i + 1].startsWith('-') && !argv[i + 1].includes('='))
        args.helpSection = argv[++i];
    } else if (arg.startsWith('--help=')) {
      args.help = true;
      args.helpSection = arg.slice('--help='.length);
    } else if (arg === '--config' || arg.startsWith('--config=')) {
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
      console.log(`${USAGE}\n\n${formatHelp(DEFAULT_JOB, args.helpSection)}`);
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
    const unsupported = distillationProblems(config);
    if (unsupported.length > 0) throw new ConfigError(unsupported);
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
    const run = new PpoRun(engine, config, {
      env,
      writeCharts: options.writeCharts,
      resumeCommand: resumeCommand(argv, config),
    });
    return await run.run(notes);
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
