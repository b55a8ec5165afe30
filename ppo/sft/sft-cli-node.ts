// Node command line of the SFT job: `node sft.js key=value …`, verl's fsdp_sft_trainer arguments as written. A whole
// verl launch line is accepted too — `node sft.js torchrun --standalone --nnodes=1 --nproc_per_node=8 -m
// verl.trainer.fsdp_sft_trainer key=value …` — the launcher's part dropped (one adapter, global batch sizes).
import { Engine } from '../../engine/index.ts';
import { ConfigError } from '../config/errors.ts';
import { parseSftOverrides, SFT_DEFAULTS } from './sft-config.ts';
import { formatJobKeys } from './job-config.ts';
import { runSftJob } from './sft-job-node.ts';

const VERL_SFT_MODULE = 'verl.trainer.fsdp_sft_trainer';
const USAGE = `usage: node sft.js data.train_files=FILE model.partial_pretrain=DIR [key=value ...]   (node sft.js --help lists every key)`;

/** The key=value arguments: a verl launch prefix (torchrun …, python3 -m verl.trainer.fsdp_sft_trainer) dropped. */
export function sftOverrides(argv: readonly string[]): string[] {
  const module = argv.indexOf('-m');
  if (module < 0) {
    const option = argv.find((arg) => arg.startsWith('-'));
    if (option) throw new ConfigError([`unknown option ${option} (${USAGE})`]);
    return [...argv];
  }
  if (argv[module + 1] !== VERL_SFT_MODULE) throw new ConfigError([`-m ${argv[module + 1] ?? ''}: this is verl's SFT trainer, ${VERL_SFT_MODULE} (the PPO trainer is node train.js)`]);
  return argv.slice(module + 2);
}

export async function main(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(`${USAGE}\n\nkeys (verl's sft_trainer.yaml, with its defaults):\n${formatJobKeys(SFT_DEFAULTS)}`);
    return 0;
  }
  let parsed;
  try {
    parsed = parseSftOverrides(sftOverrides(argv));
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    console.error(err.problems.length === 1 ? `configuration error: ${err.problems[0]}` : `configuration error:\n${err.problems.map((p) => `  - ${p}`).join('\n')}`);
    return 2;
  }
  for (const note of parsed.notes) console.error(note);
  const toConsole = parsed.config.trainer.logger.includes('console');
  const engine = await Engine.create();
  try {
    await runSftJob(engine, parsed.config, (line) => toConsole && console.log(line));
    return 0;
  } finally {
    await engine.sync();
    engine.destroy();
  }
}
