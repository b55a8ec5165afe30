// `node train.js` with bad input, as a user meets it: one line on stderr naming the file, key, row or tensor,
// a non-zero exit, no stack trace (unless TRAIN_DEBUG=1), and the previous run's files untouched. Most cases
// fail before any model work; the rest use the one-layer tiny run.
import { describe, it, expect, beforeAll } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeTinyRun, type TinyRun } from '../support/tiny-run.ts';

const TRAIN_JS = fileURLToPath(new URL('../../train.js', import.meta.url));
const BENCH_JS = fileURLToPath(new URL('../../tools/bench.js', import.meta.url));

interface Outcome {
  code: number | null;
  /** stderr's lines: the trainer's alone (train.js drops Dawn's known-harmless adapter lines). */
  errors: string[];
}

/**
 * `killAfterSeconds`: a run that hangs is killed then (exit code null) after that many seconds instead of outliving the
 * test.
 */
function train(args: string[], env: Record<string, string> = {}, killAfterSeconds?: number): Promise<Outcome> {
  return runScript(TRAIN_JS, args, env, killAfterSeconds);
}

function runScript(
  script: string,
  args: string[],
  env: Record<string, string> = {},
  killAfterSeconds?: number,
): Promise<Outcome> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [script, ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: killAfterSeconds && killAfterSeconds * 1000,
    });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('exit', (code) => done({ code, errors: stderr.split('\n').filter((l) => l.trim() !== '') }));
  });
}

/** Exit status 1 for a run stopped by an error, 2 for a configuration error (ppo/config/user-error.ts). */
function expectOneLine(outcome: Outcome, pattern: RegExp, code = 1): void {
  expect(outcome.errors, outcome.errors.join('\n')).toHaveLength(1);
  expect(outcome.errors[0]).toMatch(pattern);
  expect(outcome.code).toBe(code);
}

async function snapshot(dir: string): Promise<Record<string, string>> {
  const files: Record<string, string> = {};
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (entry.isFile())
      files[join(entry.parentPath, entry.name)] = await readFile(join(entry.parentPath, entry.name), 'utf8');
  }
  return files;
}

describe('node train.js with bad input', () => {
  let tiny: TinyRun;
  let previousRun: string;
  beforeAll(async () => {
    tiny = await makeTinyRun();
    previousRun = join(tiny.root, 'previous');
    await mkdir(join(previousRun, 'global_step_2', 'actor'), { recursive: true });
    await writeFile(join(previousRun, 'global_step_2', 'trainer_state.json'), '{}');
    await writeFile(join(previousRun, 'metrics.jsonl'), '{"step":1,"data":{}}\n{"step":2,"data":{}}\n');
  });
  const inPreviousRun = () => [
    ...tiny.overrides,
    `trainer.default_local_dir=${previousRun}`,
    'trainer.resume_mode=disable',
  ];

  it("a typo in the model path: one line naming it, the previous run's metrics and checkpoints untouched", async () => {
    const before = await snapshot(previousRun);
    const outcome = await train([...inPreviousRun(), 'actor_rollout_ref.model.path=/nonexistent/model']);
    expectOneLine(
      outcome,
      /^configuration error: actor_rollout_ref\.model\.path=\/nonexistent\/model: no such directory/,
      2,
    );
    expect(await snapshot(previousRun)).toEqual(before);
  });

  it('a bad row and an unknown data_source are named by file and line before any model work', async () => {
    const bad = join(tiny.root, 'bad.jsonl');
    const rows = (await readFile(join(tiny.root, 'train.jsonl'), 'utf8')).trim().split('\n');
    await writeFile(bad, [rows[0], '{"prompt": oops', ...rows.slice(1)].join('\n'));
    expectOneLine(
      await train([...inPreviousRun(), `data.train_files=${bad}`]),
      /^error: \S+bad\.jsonl line 2: not valid JSON/,
    );
    await writeFile(bad, [rows[0], rows[1].replace('"arithmetic"', '"my_task"')].join('\n'));
    expectOneLine(
      await train([...inPreviousRun(), `data.train_files=${bad}`]),
      /^error: \S+bad\.jsonl line 2: no rule reward for data_source "my_task"/,
    );
  });

  it(
    "resume_mode=disable moves the previous run aside once its inputs load; the new run's history starts " + 'empty',
    async () => {
      const dir = join(tiny.root, 'disable');
      await mkdir(join(dir, 'global_step_9'), { recursive: true });
      await writeFile(join(dir, 'metrics.jsonl'), '{"step":9,"data":{}}\n');
      const before = await snapshot(dir);
      expect(
        await train([
          ...tiny.overrides,
          `trainer.default_local_dir=${dir}`,
          'trainer.resume_mode=disable',
          'trainer.total_training_steps=1',
        ]),
      ).toEqual({
        code: 0,
        errors: [
          expect.stringMatching(/^fresh start: the previous run's metrics and checkpoints moved to \S+previous_run_/),
        ],
      });
      const names = await readdir(dir);
      const archive = names.find((n) => n.startsWith('previous_run_'))!;
      expect(Object.values(await snapshot(join(dir, archive)))).toEqual(Object.values(before));
      expect(names.filter((n) => n.startsWith('global_step_'))).toEqual(['global_step_1']);
      const steps = (await readFile(join(dir, 'metrics.jsonl'), 'utf8'))
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).step);
      expect(steps).toEqual([1]);
    },
  );

  it(
    'a tokenizer without a chat template names actor_rollout_ref.model.custom_chat_template, which runs it on plain ' +
      'text',
    async () => {
      const plain = join(tiny.root, 'plain-tokenizer');
      await mkdir(plain);
      await writeFile(join(plain, 'tokenizer.json'), await readFile(join(tiny.root, 'model', 'tokenizer.json')));
      const { chat_template: _, ...tokenizerConfig } = JSON.parse(
        await readFile(join(tiny.root, 'model', 'tokenizer_config.json'), 'utf8'),
      );
      await writeFile(join(plain, 'tokenizer_config.json'), JSON.stringify(tokenizerConfig));
      const args = [
        ...tiny.overrides,
        `data.tokenizer=${plain}`,
        `trainer.default_local_dir=${join(tiny.root, 'plain')}`,
        'trainer.total_training_steps=1',
      ];
      expectOneLine(
        await train(args),
        /^error: tokenizer_config\.json has no chat_template .*set actor_rollout_ref\.model\.custom_chat_template/,
      );
      // Quoted, as Hydra needs for a value with braces.
      expect(
        await train([...args, "actor_rollout_ref.model.custom_chat_template='{{ messages[-1].content }}'"]),
      ).toEqual({ code: 0, errors: [] });
      expect(await readFile(join(tiny.root, 'plain', 'global_step_1', 'actor', 'chat_template.jinja'), 'utf8')).toBe(
        '{{ messages[-1].content }}',
      );
    },
  );

  it(
    'a WEBGPU_DEVICE_CLASS that is neither gpu nor cpu: one line naming the knob and its values, the previous run ' +
      'untouched',
    async () => {
      const before = await snapshot(previousRun);
      expectOneLine(
        await train(inPreviousRun(), { WEBGPU_DEVICE_CLASS: 'tpu' }),
        /^error: WEBGPU_DEVICE_CLASS: "tpu" must be gpu or cpu/,
      );
      expect(await snapshot(previousRun)).toEqual(before);
    },
  );

  it('a WEBGPU_LIMITS other than default: one line naming the knob and its value', async () => {
    expectOneLine(
      await train(inPreviousRun(), { WEBGPU_LIMITS: 'max' }),
      /^error: WEBGPU_LIMITS: "max" must be default/,
    );
  });

  it('TRAIN_DEBUG=1 adds the stack trace', async () => {
    const outcome = await train([...inPreviousRun(), 'data.train_files=/nonexistent/train.jsonl'], {
      TRAIN_DEBUG: '1',
    });
    expect(outcome.errors[0]).toMatch(/^error: /);
    expect(outcome.errors.some((l) => /^\s+at /.test(l))).toBe(true);
  });

  it('a final validation that fails is reported after the final checkpoint is saved', async () => {
    const reward = join(tiny.root, 'reward.mjs');
    await writeFile(
      reward,
      'export function compute_score(source) { if (source === "held_out") throw new Error("judge offline"); return ' +
        '0; }\n',
    );
    const val = join(tiny.root, 'val.jsonl');
    const row = (await readFile(join(tiny.root, 'train.jsonl'), 'utf8')).split('\n')[0];
    await writeFile(val, `${row.replace('"arithmetic"', '"held_out"')}\n`);
    const dir = join(tiny.root, 'final-validation');
    const outcome = await train([
      ...tiny.overrides,
      `trainer.default_local_dir=${dir}`,
      `data.val_files=${val}`,
      `custom_reward_function.path=${reward}`,
      'trainer.total_training_steps=1',
      'trainer.test_freq=1',
    ]);
    expectOneLine(
      outcome,
      /^error: final validation failed \(the trained model is saved in \S+global_step_1; the same command runs the final validation again\): custom_reward_function compute_score of \S+ \(data_source "held_out".* threw: judge offline$/,
    );
    expect(await readdir(join(dir, 'global_step_1'))).toContain('trainer_state.json');
  });

  it(
    'a reward that never settles stops at custom_reward_function.timeout instead of hanging or exiting ' + 'silently',
    async () => {
      const reward = join(tiny.root, 'never.mjs');
      await writeFile(reward, 'export function compute_score() { return new Promise(() => {}); }\n');
      const outcome = await train([
        ...tiny.overrides,
        `trainer.default_local_dir=${join(tiny.root, 'never')}`,
        `custom_reward_function.path=${reward}`,
        'custom_reward_function.timeout=1',
        'trainer.total_training_steps=1',
      ]);
      expectOneLine(
        outcome,
        /^error: custom_reward_function compute_score .* did not return within custom_reward_function\.timeout=1 s$/,
      );
    },
  );

  it(
    'a reward that never returns (a synchronous loop) is stopped at custom_reward_function.timeout: one line, exit ' +
      '1, no checkpoint',
    async () => {
      const reward = join(tiny.root, 'loops.mjs');
      await writeFile(reward, 'export function compute_score() { while (true) {} }\n');
      const dir = join(tiny.root, 'loops');
      const outcome = await train(
        [
          ...tiny.overrides,
          `trainer.default_local_dir=${dir}`,
          `custom_reward_function.path=${reward}`,
          'custom_reward_function.timeout=2',
          'trainer.total_training_steps=1',
        ],
        {},
        120,
      );
      expectOneLine(
        outcome,
        /^error: custom_reward_function compute_score of \S+loops\.mjs \(data_source "arithmetic", ground_truth .*, response .*\) did not return within custom_reward_function\.timeout=2 s$/,
      );
      expect((await readdir(dir)).filter((n) => n.startsWith('global_step_'))).toEqual([]);
    },
  );

  it('a learning rate of 1e9: one line naming the non-finite tensor and step, exit 1, no checkpoint', async () => {
    const dir = join(tiny.root, 'diverging');
    const outcome = await train([
      ...tiny.overrides,
      `trainer.default_local_dir=${dir}`,
      'actor_rollout_ref.actor.optim.lr=1e9',
      'critic.optim.lr=1e9',
      'trainer.total_training_steps=4',
    ]);
    expectOneLine(
      outcome,
      /^error: step \d: \S+ is (NaN|-?Infinity); the step was stopped before the optimizer applied it/,
    );
    expect((await readdir(dir)).filter((n) => n.startsWith('global_step_'))).toEqual([]);
  });

  it('Ctrl-C finishes the step, saves a checkpoint, says where to resume, and the run resumes from it', async () => {
    const dir = join(tiny.root, 'interrupted');
    const args = [TRAIN_JS, ...tiny.overrides, `trainer.default_local_dir=${dir}`, 'trainer.total_training_steps=200'];
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const exited = new Promise<number | null>((done) => child.on('exit', done));
    // Interrupt once the first step's metrics line is written.
    for (;;) {
      const lines = await readFile(join(dir, 'metrics.jsonl'), 'utf8').catch(() => '');
      if (lines.trim() !== '') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    child.kill('SIGINT');
    expect(await exited).toBe(130);
    const saved = /interrupted by SIGINT after step (\d+): checkpoint (\S+); the same command resumes from it/.exec(
      stderr,
    );
    expect(saved, stderr).not.toBeNull();
    expect(await readdir(saved![2])).toContain('trainer_state.json');
    const metrics = (await readFile(join(dir, 'metrics.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const step = Number(saved![1]);
    expect(metrics.at(-1).step).toBe(step);
    const resumed = await train([
      ...tiny.overrides,
      `trainer.default_local_dir=${dir}`,
      `trainer.total_training_steps=${step + 1}`,
    ]);
    expect(resumed).toEqual({ code: 0, errors: [] });
    const after = (await readFile(join(dir, 'metrics.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l).step);
    expect(after).toEqual([...Array.from({ length: step }, (_, i) => i + 1), step + 1]);
  });

  it('Ctrl-C during the warm start stops at once, says the same command starts over, and writes nothing', async () => {
    const dir = join(tiny.root, 'interrupted-warm-start');
    const child = spawn(process.execPath, [TRAIN_JS, `trainer.default_local_dir=${dir}`], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const exited = new Promise<number | null>((done) => child.on('exit', done));
    while (!stdout.includes('warm start (pretraining) step 1/')) await new Promise((r) => setTimeout(r, 50));
    child.kill('SIGINT');
    expect(await exited).toBe(130);
    const errors = stderr.split('\n').filter((l) => l.trim() !== '');
    expect(errors).toEqual([
      'SIGINT: stopped during setup and the warm start; nothing of this run was written, so the same command starts ' +
        'over',
    ]);
    expect(await readdir(dir).catch(() => null)).toBeNull();
  });
});

describe('node tools/bench.js with a bad flag', () => {
  it('one line naming the flag and what it takes, status 1, no stack trace', async () => {
    expectOneLine(
      await runScript(BENCH_JS, ['servers', '--serve-throughput', '--client=curl'], {}, 60),
      /^error: --client=curl: expected http or fetch$/,
    );
    expectOneLine(
      await runScript(BENCH_JS, ['servers', '--serve-throughput', '--rounds=0'], {}, 60),
      /^error: --rounds=0: expected an integer ≥ 1$/,
    );
  });
});
