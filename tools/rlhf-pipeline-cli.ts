// The built-in RLHF pipeline on the arithmetic task, chained as a user chains the stages: it writes the data a user
// would bring (JSONL in verl's and TRL's shapes, from the task's own generator), then runs `node sft.js`,
// `node reward-model.js` and `node train.js` as child processes, each command printed before it runs and each
// stage's checkpoint the next stage's input. PPO scores its rollouts with the learned reward model
// (reward_model.enable=true, the critic initialised from it too); the task's exact-match rule only validates.
// The base model is the browser demo's starting checkpoint (the default job's warm start, which can add and mostly
// answers with a trailing space): training addition from scratch would take the pipeline's whole budget.
// Stopping and resuming: Ctrl-C, SIGTERM or SIGHUP reaches the running stage once (it runs in its own process
// group, tied to this process: a kill -9 of the pipeline ends it too), which saves its last completed step as it
// does alone; the pipeline then says what was saved and exits as the stage did. --out's pipeline.json records each
// finished stage, so the same command skips those and resumes the first unfinished one from its newest checkpoint.
import { mkdir, readdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnTiedChild, STOP_SIGNALS } from '../engine/native-stderr-node.ts';
import { BUILTIN_TASKS } from '../ppo/tasks/builtin-tasks.ts';
import { WARM_START_RECORD_FILE, type WarmStartRecord } from '../ppo/tasks/default-job.ts';
import { arithmeticQa, preferencePairs, sloppyDemonstrations } from '../ppo/tasks/arithmetic-preferences.ts';

const USAGE = 'usage: node tools/rlhf-pipeline.js [--out DIR]';
const REPO = resolve(fileURLToPath(new URL('..', import.meta.url)));
const BASE_MODEL = join(REPO, 'demo/public/warm-start');
/** Held-out prompts: the SFT and reward-model validation sets and PPO's validation. */
const VAL_SIZE = 128;
/** Training pairs for the reward model (one per training problem, the first ones). */
const PAIRS = 1024;
/**
 * A KL loss to the frozen reference (the SFT model), as RLHF runs against a learned reward do. The reward model
 * learns the answer's form but not its sum (held out: every trailing-space and echoed pair right, 12 of 28 wrong
 * sums), so PPO without it, after raising exact match from 0 to 0.86 in 10 steps, drifted to bare wrong sums the
 * reward model scores as high (0.61 at step 20); with it the sums stay the SFT model's (0.88 at step 20).
 */
const KL_TO_REFERENCE = ['actor_rollout_ref.actor.use_kl_loss=true', 'actor_rollout_ref.actor.kl_loss_coef=0.1'];

/**
 * A stage's command line as a user types it: paths relative to the working directory, quoted where the shell needs it.
 */
function commandLine(script: string, args: readonly string[]): string {
  const quote = (arg: string) => (/^[\w./=,:@+-]+$/.test(arg) ? arg : `'${arg.replaceAll("'", "'\\''")}'`);
  return ['node', script, ...args].map(quote).join(' ');
}

/** What --out/pipeline.json records: each finished stage's seconds, so a re-run skips it. */
interface PipelineState {
  finished: Partial<Record<Stage, { seconds: number }>>;
}
type Stage = 'sft' | 'rm' | 'ppo';
const STATE_FILE = 'pipeline.json';

/** A stage that did not finish: its exit status becomes the pipeline's, after `message`. */
class StageStopped extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

/**
 * Runs `node script args…` with the output passed through and a stop signal forwarded to it; resolves to its
 * seconds, or throws StageStopped when it did not end with status 0.
 */
async function runStage(script: string, args: readonly string[]): Promise<number> {
  console.log(`\n$ ${commandLine(script, args)}`);
  const started = performance.now();
  let stopSignal: NodeJS.Signals | null = null;
  const [status, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((done, fail) => {
    const child = spawnTiedChild([join(REPO, script), ...args], { stdio: 'inherit' });
    const forward = (received: NodeJS.Signals) => {
      stopSignal ??= received;
      child.kill(received);
    };
    for (const s of STOP_SIGNALS) process.on(s, forward);
    child.on('error', fail);
    child.on('exit', (c, s) => {
      for (const stop of STOP_SIGNALS) process.off(stop, forward);
      done([c, s]);
    });
  });
  if (status === 0) return (performance.now() - started) / 1000;
  const code = status ?? 128 + (signal === 'SIGKILL' ? 9 : 1);
  throw new StageStopped(
    stopSignal
      ? `${stopSignal}: stopped ${script} (status ${code})`
      : `${script} exited with status ${signal ?? code}; the pipeline stops (its command is printed above)`,
    code,
  );
}

/** The metrics a stage's file logger wrote (verl's {"step", "data"} lines). */
async function metrics(dir: string): Promise<{ step: number; data: Record<string, number> }[]> {
  const text = await readFile(join(dir, 'metrics.jsonl'), 'utf8');
  return text
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line));
}

/** The values of `key` in step order. */
function series(lines: { data: Record<string, number> }[], key: string): number[] {
  return lines.map((l) => l.data[key]).filter((v) => v !== undefined);
}

/** The newest global_step_N of a job's run directory: what the next stage reads. */
async function newestCheckpoint(dir: string): Promise<string> {
  const steps = (await readdir(dir))
    .map((name) => /^global_step_(\d+)$/.exec(name))
    .filter((m) => m !== null)
    .map((m) => Number(m[1]));
  if (steps.length === 0) throw new Error(`${dir}: the stage saved no global_step_N checkpoint`);
  return join(dir, `global_step_${Math.max(...steps)}`);
}

const jsonl = (rows: readonly object[]) => `${rows.map((r) => JSON.stringify(r)).join('\n')}\n`;

export async function runPipeline(argv: string[]): Promise<number> {
  const outAt = argv.indexOf('--out');
  const given = outAt >= 0 ? argv.slice(outAt, outAt + 2) : [];
  if (argv.length !== given.length || given.length === 1) throw new Error(USAGE);
  const out = resolve(given[1] ?? 'runs/rlhf-pipeline');
  const rel = (path: string) => relative(process.cwd(), path) || '.';
  const stateFile = join(out, STATE_FILE);
  const state = await readState(out, stateFile);
  const saveState = async () => {
    await writeFile(`${stateFile}.tmp`, `${JSON.stringify(state, null, 1)}\n`);
    await rename(`${stateFile}.tmp`, stateFile);
  };
  const dirs = { sft: join(out, 'sft'), rm: join(out, 'rm'), ppo: join(out, 'ppo') };
  const continueCommand = commandLine('tools/rlhf-pipeline.js', ['--out', rel(out)]);
  const stage = async (name: Stage, script: string, args: readonly string[]) => {
    const done = state.finished[name];
    if (done) {
      console.log(`\n${name}: finished in an earlier run (${rel(dirs[name])}), skipped`);
      return;
    }
    try {
      state.finished[name] = { seconds: await runStage(script, args) };
    } catch (err) {
      if (!(err instanceof StageStopped)) throw err;
      const saved = (Object.keys(state.finished) as Stage[]).map((s) => `${s} (${rel(dirs[s])})`);
      const partial = await newestCheckpoint(dirs[name]).catch(() => null);
      console.error(
        `${err.message}; the pipeline stopped in its ${name} stage. Saved: ` +
          [...saved, partial ? `${name} up to ${rel(partial)}` : `nothing of ${name}`].join(', ') +
          `. \`${continueCommand}\` continues with the ${name} stage` +
          (partial ? `, resuming from ${rel(partial)}` : ''),
      );
      throw err;
    }
    await saveState();
  };
  try {
    return await runStages(out, rel, dirs, stage, state, saveState);
  } catch (err) {
    if (err instanceof StageStopped) return err.status;
    throw err;
  }
}

/** --out's record of finished stages: empty for a fresh (or empty) directory; any other non-empty one is refused. */
async function readState(out: string, stateFile: string): Promise<PipelineState> {
  const text = await readFile(stateFile, 'utf8').catch(() => null);
  if (text === null) {
    if ((await readdir(out).catch(() => [])).length > 0)
      throw new Error(
        `--out ${out}: not empty and not a pipeline's directory (no ${STATE_FILE}); the pipeline starts from a ` +
          `fresh directory or resumes its own`,
      );
    return { finished: {} };
  }
  try {
    const state = JSON.parse(text) as PipelineState;
    if (typeof state.finished !== 'object' || state.finished === null) throw new Error('no "finished" object');
    console.log(
      `resuming the pipeline in ${out}: finished ${Object.keys(state.finished).join(', ') || 'no stage yet'}`,
    );
    return state;
  } catch (err) {
    throw new Error(`${stateFile}: not the pipeline's record of finished stages (${(err as Error).message})`);
  }
}

/** Writes the data (the same files each time) and runs each stage not finished yet; then prints the figures. */
async function runStages(
  out: string,
  rel: (path: string) => string,
  dirs: Record<Stage, string>,
  stage: (name: Stage, script: string, args: readonly string[]) => Promise<void>,
  state: PipelineState,
  saveState: () => Promise<void>,
): Promise<number> {
  // The base model's own split: its warm start trained on these training problems, so the held-out ones stay unseen.
  const record = JSON.parse(await readFile(join(BASE_MODEL, WARM_START_RECORD_FILE), 'utf8')) as WarmStartRecord;
  const { train, val } = BUILTIN_TASKS.arithmetic.records(record.dataSeed, VAL_SIZE);
  const trainQa = arithmeticQa(train);
  const valQa = arithmeticQa(val);
  const data = join(out, 'data');
  await mkdir(data, { recursive: true });
  const files = {
    sftTrain: join(data, 'sft_train.jsonl'),
    sftVal: join(data, 'sft_val.jsonl'),
    pairsTrain: join(data, 'pairs_train.jsonl'),
    pairsVal: join(data, 'pairs_val.jsonl'),
    ppoTrain: join(data, 'train.jsonl'),
    ppoVal: join(data, 'val.jsonl'),
  };
  await writeFile(files.sftTrain, jsonl(sloppyDemonstrations(trainQa, record.dataSeed)));
  await writeFile(files.sftVal, jsonl(sloppyDemonstrations(valQa, record.dataSeed + 1)));
  await writeFile(files.pairsTrain, jsonl(preferencePairs(trainQa.slice(0, PAIRS), record.dataSeed)));
  await writeFile(files.pairsVal, jsonl(preferencePairs(valQa, record.dataSeed + 1)));
  await writeFile(files.ppoTrain, jsonl(train.map((r) => r.row)));
  await writeFile(files.ppoVal, jsonl(val.map((r) => r.row)));
  console.log(
    `wrote ${rel(data)}: ${trainQa.length} SFT demonstrations, ${PAIRS} preference pairs, ${train.length} PPO ` +
      `prompts (${VAL_SIZE} held out)`,
  );
  await saveState();

  await stage('sft', 'sft.js', [
    `data.train_files=${rel(files.sftTrain)}`,
    `data.val_files=${rel(files.sftVal)}`,
    'data.prompt_key=question',
    'data.response_key=answer',
    'data.prompt_dict_keys=null',
    'data.response_dict_keys=null',
    'data.max_length=24',
    'data.train_batch_size=64',
    'data.micro_batch_size_per_gpu=64',
    `model.partial_pretrain=${rel(BASE_MODEL)}`,
    'optim.lr=3e-4',
    'trainer.total_training_steps=20',
    'trainer.test_freq=10',
    `trainer.default_local_dir=${rel(dirs.sft)}`,
    'trainer.logger=[console,file]',
  ]);
  const sft = await newestCheckpoint(dirs.sft);
  await stage('rm', 'reward-model.js', [
    `data.train_files=${rel(files.pairsTrain)}`,
    `data.val_files=${rel(files.pairsVal)}`,
    'data.max_length=32',
    'data.train_batch_size=32',
    'data.micro_batch_size_per_gpu=32',
    `model.partial_pretrain=${rel(sft)}`,
    'optim.lr=1e-3',
    'trainer.total_epochs=1',
    'trainer.test_freq=8',
    `trainer.default_local_dir=${rel(dirs.rm)}`,
    'trainer.logger=[console,file]',
  ]);
  const rm = await newestCheckpoint(dirs.rm);
  await stage('ppo', 'train.js', [
    '--config',
    rel(join(REPO, 'examples/arithmetic_tiny.yaml')),
    `data.train_files=${rel(files.ppoTrain)}`,
    `data.val_files=${rel(files.ppoVal)}`,
    `actor_rollout_ref.model.path=${rel(sft)}`,
    'reward_model.enable=true',
    `reward_model.model.path=${rel(rm)}`,
    `critic.model.path=${rel(rm)}`,
    'data.train_batch_size=64',
    'actor_rollout_ref.actor.ppo_mini_batch_size=32',
    ...KL_TO_REFERENCE,
    'trainer.total_training_steps=20',
    'trainer.test_freq=5',
    'trainer.save_freq=20',
    `trainer.default_local_dir=${rel(dirs.ppo)}`,
    'trainer.logger=[console,file]',
  ]);

  const wall = Object.fromEntries(Object.entries(state.finished).map(([k, v]) => [k, v.seconds]));
  const sftLoss = await metrics(dirs.sft);
  const rmMetrics = await metrics(dirs.rm);
  const ppoMetrics = await metrics(dirs.ppo);
  const accuracy = series(ppoMetrics, 'val-core/arithmetic/reward/mean@1');
  const fmt = (values: number[]) => values.map((v) => v.toFixed(3)).join(' → ');
  console.log('\nRLHF pipeline figures');
  console.log(
    `  SFT            train/loss ${fmt([series(sftLoss, 'train/loss')[0], series(sftLoss, 'train/loss').at(-1)!])}, ` +
      `val/loss ${fmt(series(sftLoss, 'val/loss'))}  (${wall.sft.toFixed(0)} s)`,
  );
  console.log(
    `  reward model   held-out accuracy ${fmt(series(rmMetrics, 'val/accuracy'))}, mean margin ` +
      `${fmt(series(rmMetrics, 'val/margin'))}  (${wall.rm.toFixed(0)} s)`,
  );
  console.log(
    `  PPO            exact-match validation accuracy ${fmt(accuracy)}, learned reward critic/score/mean ` +
      `${fmt([series(ppoMetrics, 'critic/score/mean')[0], series(ppoMetrics, 'critic/score/mean').at(-1)!])}  ` +
      `(${wall.ppo.toFixed(0)} s)`,
  );
  return 0;
}
