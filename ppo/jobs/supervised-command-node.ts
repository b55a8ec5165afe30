// Node command line of the supervised jobs: `node sft.js key=value …` (verl's fsdp_sft_trainer arguments as written)
// and `node reward-model.js key=value …`. A whole verl launch line is accepted too — `node sft.js torchrun --standalone
// --nnodes=1 --nproc_per_node=8 -m verl.trainer.fsdp_sft_trainer key=value …` — the launcher's part dropped (one
// adapter, global batch sizes).
import { Engine } from '../../engine/index.ts';
import { ConfigError } from '../config/errors.ts';
import { formatJobKeys } from '../config/supervised-keys.ts';
import { parseSftOverrides, SFT_DEFAULTS } from '../sft/sft-config.ts';
import { runSftJob } from './sft-job-node.ts';
import { parseRewardOverrides, REWARD_DEFAULTS } from '../reward-model/reward-config.ts';
import { runRewardJob } from './reward-model-job-node.ts';
import type { JobOutput, JobTrainerKeys, TrainingJobResult } from './supervised-run-node.ts';
import { signalExitCode } from './stop-signals-node.ts';

export type SupervisedJobName = 'sft' | 'reward-model';

interface SupervisedJob {
  script: string;
  /** The verl module whose launch line this job accepts, if any. */
  verlModule: string | null;
  defaults: object;
  parse(overrides: readonly string[]): { config: { trainer: JobTrainerKeys }; notes: string[] };
  run(engine: Engine, config: unknown, output: JobOutput): Promise<TrainingJobResult>;
}

export const SUPERVISED_JOBS: Record<SupervisedJobName, SupervisedJob> = {
  sft: {
    script: 'sft.js',
    verlModule: 'verl.trainer.fsdp_sft_trainer',
    defaults: SFT_DEFAULTS,
    parse: parseSftOverrides,
    run: (engine, config, { log, warn }) =>
      runSftJob(engine, config as ReturnType<typeof parseSftOverrides>['config'], log, warn),
  },
  'reward-model': {
    script: 'reward-model.js',
    verlModule: null,
    defaults: REWARD_DEFAULTS,
    parse: parseRewardOverrides,
    run: (engine, config, { log, warn }) =>
      runRewardJob(engine, config as ReturnType<typeof parseRewardOverrides>['config'], log, warn),
  },
};

const usage = (job: SupervisedJob) =>
  `usage: node ${job.script} data.train_files=FILE model.partial_pretrain=DIR [key=value ...]   (node ${job.script} ` +
  `--help lists every key)`;

/** The key=value arguments: a verl launch prefix (torchrun …, python3 -m MODULE) dropped. */
export function jobOverrides(name: SupervisedJobName, argv: readonly string[]): string[] {
  const job = SUPERVISED_JOBS[name];
  const module = argv.indexOf('-m');
  if (module < 0 || job.verlModule === null) {
    const option = argv.find((arg) => arg.startsWith('-'));
    if (option) throw new ConfigError([`unknown option ${option} (${usage(job)})`]);
    return [...argv];
  }
  if (argv[module + 1] !== job.verlModule)
    throw new ConfigError([
      `-m ${argv[module + 1] ?? ''}: node ${job.script} runs ${job.verlModule} (the PPO trainer is node train.js)`,
    ]);
  return argv.slice(module + 2);
}

export async function main(name: SupervisedJobName, argv: string[]): Promise<number> {
  const job = SUPERVISED_JOBS[name];
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(`${usage(job)}\n\nkeys, with their defaults:\n${formatJobKeys(job.defaults)}`);
    return 0;
  }
  let parsed: ReturnType<typeof job.parse>;
  try {
    parsed = job.parse(jobOverrides(name, argv));
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    console.error(
      err.problems.length === 1
        ? `configuration error: ${err.problems[0]}`
        : `configuration error:\n${err.problems.map((p) => `  - ${p}`).join('\n')}`,
    );
    return 2;
  }
  for (const note of parsed.notes) console.error(note);
  const toConsole = parsed.config.trainer.logger.includes('console');
  const engine = await Engine.create();
  try {
    const result = await job.run(engine, parsed.config, {
      log: (line) => toConsole && console.log(line),
      warn: (line) => console.error(line),
    });
    // Stopped by a signal after saving its last completed step: exits as shells report a process that signal ended.
    return result.stoppedBy ? signalExitCode(result.stoppedBy) : 0;
  } finally {
    await engine.sync();
    engine.destroy();
  }
}
