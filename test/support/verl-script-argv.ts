// verl's own launch scripts, run as their users run them: the files under test/support/data/verl-1dda039b and
// verl-b178a3cd are verl's (byte for byte, MANIFEST.json), and bash runs each one from the copy's root with python3
// and uv stubbed to write the argv of `python3 -m verl.trainer.main_ppo` (or DAPO's `recipe.dapo.main_dapo`) to a
// file, and the other programs a script calls (ray, nvidia-smi, huggingface-cli, sleep, tee, …) stubbed to do
// nothing. A data-preparation program (`python3 FILE.py …`) succeeds without writing anything; any other python3
// call fails, as on a machine without torch_npu: the scripts that probe it take their GPU branch. Slurm's srun runs
// the command it is given, on this machine. What comes back is what Hydra would be given, with no hand-typed copy in
// between.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { makeTempDirSync } from './temp-dir.ts';

export const VERL_HEAD_ROOT = 'test/support/data/verl-1dda039b';
export const VERL_B178A3CD_ROOT = 'test/support/data/verl-b178a3cd';

/** Whether bash can run the scripts here (not on Windows without one). */
export const HAS_BASH = spawnSync('bash', ['-c', 'exit 0']).status === 0;

const DO_NOTHING = ['ray', 'nvidia-smi', 'huggingface-cli', 'hf', 'sleep', 'scontrol', 'conda', 'pip', 'wandb'];

let stubs: { dir: string; home: string; argvFile: string } | null = null;

function stubDirectory() {
  if (stubs) return stubs;
  const dir = makeTempDirSync('verl-script-stubs-');
  const argvFile = join(dir, 'argv');
  const write = (name: string, body: string) => {
    writeFileSync(join(dir, name), `#!/bin/bash\n${body}\n`);
    chmodSync(join(dir, name), 0o755);
  };
  const python = [
    'for a in "$@"; do case "$a" in *main_ppo*|*main_dapo*) printf \'%s\\0\' "$@" > "$ARGV_OUT"; exit 0;; esac; done',
    'case "$1" in *.py) exit 0;; esac',
    'exit 1',
  ].join('\n');
  write('python3', python);
  write('python', python);
  write('uv', `exec "${join(dir, 'python3')}" "$@"`);
  write('tee', 'cat > /dev/null');
  write('srun', 'while [[ "$1" == -* ]]; do case "$1" in -w|-N|-n) shift 2;; *) shift;; esac; done\nexec "$@"');
  for (const name of DO_NOTHING) write(name, 'exit 0');
  stubs = { dir, home: makeTempDirSync('verl-script-home-'), argvFile };
  return stubs;
}

/**
 * The argv after `verl.trainer.main_ppo` that bash gives python3 when it runs `script` (a path inside `root`, run from
 * `root`), with HOME a fresh folder and `env` added. `ulimit -n` needs privileges a test lacks, so it is a no-op.
 */
export function scriptArgv(root: string, script: string, env: Record<string, string> = {}): string[] {
  return runWithStubs(root, ['-c', 'ulimit() { :; }; source "$0"', script], env);
}

/** The same for the `.. code-block:: bash` of an .rst page that runs main_ppo (verl's quickstart). */
export function rstBlockArgv(root: string, page: string): string[] {
  const lines = readFileSync(join(root, page), 'utf8').split('\n');
  let block: string | undefined;
  lines.forEach((line, i) => {
    if (block !== undefined || line !== '.. code-block:: bash') return;
    const end = lines.findIndex((next, j) => j > i && next !== '' && !/^\s/.test(next));
    const text = lines.slice(i + 1, end).join('\n');
    if (text.includes('main_ppo')) block = text;
  });
  if (block === undefined) throw new Error(`${page}: no code-block runs main_ppo`);
  return runWithStubs(root, ['-c', block], {});
}

function runWithStubs(root: string, bashArgs: string[], env: Record<string, string>): string[] {
  const { dir, home, argvFile } = stubDirectory();
  writeFileSync(argvFile, '');
  execFileSync('bash', bashArgs, {
    cwd: resolve(root),
    env: { HOME: home, PATH: `${dir}:/usr/bin:/bin`, ARGV_OUT: argvFile, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const argv = readFileSync(argvFile, 'utf8').split('\0').slice(0, -1);
  const start = argv.map((arg) => /main_(ppo|dapo)/.test(arg)).lastIndexOf(true);
  if (start < 0) throw new Error(`${bashArgs.at(-1)}: python3 -m verl.trainer.main_ppo was never run`);
  return argv.slice(start + 1);
}

export interface ScriptPaths {
  model: string;
  data: string;
  runDir: string;
}

/** The script's argv with its model, data and run-directory paths replaced by a test's. */
export function withPaths(argv: readonly string[], paths: ScriptPaths): string[] {
  return argv.map((arg) => {
    const eq = arg.indexOf('=');
    const key = arg.slice(0, eq).replace(/^\+\+?/, '');
    if (key.endsWith('model.path')) return `${arg.slice(0, eq)}=${paths.model}`;
    if (key === 'data.train_files' || key === 'data.val_files') return `${arg.slice(0, eq)}=${paths.data}`;
    if (key === 'trainer.default_local_dir') return `${arg.slice(0, eq)}=${paths.runDir}`;
    return arg;
  });
}
