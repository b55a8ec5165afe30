// Nothing lost, whatever stops a run: `node train.js` on the one-layer tiny run, stopped as users and schedulers
// stop it — a non-finite weight in a file it loads, SIGTERM and SIGHUP, an error after completed steps, a final
// validation that fails, a truncated newest checkpoint, a second run in the same directory — and what it says,
// saves and resumes each time. Servers are on loopback; every run directory is a temporary one.
import { describe, it, expect, beforeAll } from 'vitest';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { cp, open, readdir, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseHeader, readHeaderLength } from '../../models/safetensors.ts';
import { makeTinyRun, runMetrics, type TinyRun } from '../support/tiny-run.ts';

const TRAIN_JS = fileURLToPath(new URL('../../train.js', import.meta.url));

interface Outcome {
  code: number | null;
  stdout: string;
  /** stderr's lines: the trainer's alone (train.js drops Dawn's known-harmless adapter lines). */
  errors: string[];
}

function start(args: string[]): { child: ChildProcess; outcome: Promise<Outcome> } {
  const child = spawn(process.execPath, [TRAIN_JS, ...args], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 240_000 });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk) => (stdout += chunk));
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const outcome = new Promise<Outcome>((done) =>
    child.on('exit', (code) =>
      done({
        code,
        stdout,
        errors: stderr.split('\n').filter((l) => l.trim() !== ''),
      }),
    ),
  );
  return { child, outcome };
}

const train = (args: string[]) => start(args).outcome;

async function waitForFirstStep(dir: string): Promise<void> {
  for (;;) {
    if ((await readFile(join(dir, 'metrics.jsonl'), 'utf8').catch(() => '')).trim() !== '') return;
    await new Promise((r) => setTimeout(r, 50));
  }
}

const exists = (path: string) =>
  stat(path).then(
    () => true,
    () => false,
  );
const stepDirs = async (dir: string) => (await readdir(dir)).filter((n) => /^global_step_\d+$/.test(n)).sort();

describe('node train.js: nothing lost, whatever stops the run', () => {
  let tiny: TinyRun;
  let val: string;
  beforeAll(async () => {
    tiny = await makeTinyRun();
    val = join(tiny.root, 'val.jsonl');
    const rows = (await readFile(join(tiny.root, 'train.jsonl'), 'utf8')).trim().split('\n');
    await writeFile(val, `${rows.slice(0, 2).join('\n')}\n`);
  });
  const inDir = (name: string) => [...tiny.overrides, `trainer.default_local_dir=${join(tiny.root, name)}`];

  it(
    'a NaN in an embedding row the loss never touches stops the run at load, naming the file, tensor and index; ' +
      'nothing is written',
    async () => {
      const model = join(tiny.root, 'nan-model');
      await cp(join(tiny.root, 'model'), model, { recursive: true });
      const file = join(model, 'model.safetensors');
      const handle = await open(file, 'r+');
      try {
        const { size } = await handle.stat();
        const first8 = new Uint8Array(8);
        await handle.read(first8, 0, 8, 0);
        const headerBytes = new Uint8Array(readHeaderLength(first8, size, file));
        await handle.read(headerBytes, 0, headerBytes.length, 8);
        const header = parseHeader(headerBytes, size, file);
        const embed = header.tensors.find((t) => t.name === 'model.embed_tokens.weight')!;
        expect(embed.dtype).toBe('F32');
        const [rows, columns] = embed.shape;
        const index = (rows - 1) * columns + 3;
        const nan = new Uint8Array(new Float32Array([NaN]).buffer);
        await handle.write(nan, 0, 4, header.dataOffset + embed.begin + index * 4);
      } finally {
        await handle.close();
      }
      const dir = join(tiny.root, 'nan');
      const outcome = await train([
        ...tiny.overrides,
        `actor_rollout_ref.model.path=${model}`,
        `trainer.default_local_dir=${dir}`,
      ]);
      expect(outcome.code).toBe(1);
      expect(outcome.errors).toHaveLength(1);
      expect(outcome.errors[0]).toMatch(
        /^error: \S+nan-model\/model\.safetensors: tensor 'model\.embed_tokens\.weight' holds NaN at index \d+ \(row \d+, column 3\); refusing to load the actor with non-finite weights/,
      );
      expect(await exists(dir)).toBe(false);
    },
  );

  it(
    'SIGTERM finishes the step, saves it and exits 143 while a second run in the same directory is refused; the ' +
      'lock goes with the run',
    async () => {
      const dir = join(tiny.root, 'sigterm');
      const first = start([...inDir('sigterm'), 'trainer.total_training_steps=200']);
      await waitForFirstStep(dir);
      const lock = JSON.parse(await readFile(join(dir, 'run.lock'), 'utf8'));
      // The trainer is train.js's child (train.js filters its stderr: engine/native-stderr-node.ts).
      expect(lock.host).toBe(hostname());
      expect(Number(execFileSync('ps', ['-o', 'ppid=', '-p', String(lock.pid)], { encoding: 'utf8' }).trim())).toBe(
        first.child.pid,
      );
      const second = await train([...inDir('sigterm'), 'trainer.total_training_steps=2']);
      expect(second.code).toBe(1);
      expect(second.errors).toHaveLength(1);
      expect(second.errors[0]).toMatch(
        new RegExp(
          `^error: trainer\\.default_local_dir=\\S+sigterm is in use by another run \\(pid ${lock.pid} on ` +
            `${hostname()}, since .*\\) — wait for it`,
        ),
      );
      first.child.kill('SIGTERM');
      const outcome = await first.outcome;
      expect(outcome.code).toBe(143);
      const saved =
        /^interrupted by SIGTERM after step (\d+): checkpoint (\S+); the same command resumes from it$/.exec(
          outcome.errors.at(-1)!,
        );
      expect(saved, outcome.errors.join('\n')).not.toBeNull();
      expect(outcome.errors[0]).toMatch(/^SIGTERM: finishing step \d+, then saving a checkpoint and stopping/);
      expect((await runMetrics(dir)).map((m) => m.step).at(-1)).toBe(Number(saved![1]));
      expect(await exists(join(saved![2], 'trainer_state.json'))).toBe(true);
      expect(await exists(join(dir, 'run.lock'))).toBe(false);
    },
  );

  it('SIGHUP acts as Ctrl-C (exit 129) in a directory whose lock a dead run left, which is taken over', async () => {
    const dir = join(tiny.root, 'sighup');
    const gone = spawn(process.execPath, ['-e', '']);
    await new Promise((done) => gone.on('exit', done));
    await train([...inDir('sighup'), 'trainer.total_training_steps=1']);
    await writeFile(join(dir, 'run.lock'), JSON.stringify({ pid: gone.pid, host: hostname(), started: 'earlier' }));
    const run = start([...inDir('sighup'), 'trainer.total_training_steps=200']);
    await new Promise((r) => setTimeout(r, 100));
    for (;;) {
      if ((await runMetrics(dir)).length > 1) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    run.child.kill('SIGHUP');
    const outcome = await run.outcome;
    expect(outcome.code).toBe(129);
    expect(outcome.errors[0]).toBe(
      `took over ${join(dir, 'run.lock')}: its run (pid ${gone.pid} on ${hostname()}) is gone`,
    );
    expect(outcome.errors.at(-1)).toMatch(
      /^interrupted by SIGHUP after step \d+: checkpoint \S+global_step_\d+; the same command resumes from it$/,
    );
  });

  it(
    'an error after completed steps saves the last completed one; its last line says so and how to resume, and ' +
      'resuming matches an uninterrupted run',
    async () => {
      const failing = join(tiny.root, 'judge-fails.mjs');
      // 4 prompts × 1 sample a step: the 9th call is step 3's first.
      await writeFile(
        failing,
        'let calls = 0;\nexport function compute_score() { if (++calls > 8) throw new Error("judge offline"); return ' +
          'calls % 3 === 0 ? 1 : 0; }\n',
      );
      const dir = join(tiny.root, 'error-save');
      const args = [...inDir('error-save'), `custom_reward_function.path=${failing}`, 'trainer.total_training_steps=4'];
      const outcome = await train(args);
      expect(outcome.code).toBe(1);
      expect(outcome.errors).toHaveLength(1);
      expect(outcome.errors[0]).toMatch(
        /^error: custom_reward_function compute_score .* threw: judge offline; saved step 2, the last completed, to \S+global_step_2 — resume with: node train\.js .*trainer\.total_training_steps=4$/,
      );
      expect(await stepDirs(dir)).toEqual(['global_step_2']);
      const state = JSON.parse(await readFile(join(dir, 'global_step_2', 'trainer_state.json'), 'utf8'));
      expect(state).toMatchObject({ globalStep: 2, finalValidationDone: false });

      // The same rewards from a module that does not fail: resumed, steps 3 and 4 are those of a run that never
      // stopped.
      await writeFile(
        failing,
        'let calls = 8;\nexport function compute_score() { return ++calls % 3 === 0 ? 1 : 0; }\n',
      );
      expect((await train(args)).code).toBe(0);
      const straight = join(tiny.root, 'judge-works.mjs');
      await writeFile(
        straight,
        'let calls = 0;\nexport function compute_score() { return ++calls % 3 === 0 ? 1 : 0; }\n',
      );
      expect(
        (
          await train([
            ...inDir('no-error'),
            `custom_reward_function.path=${straight}`,
            'trainer.total_training_steps=4',
          ])
        ).code,
      ).toBe(0);
      const resumed = await runMetrics(dir);
      const uninterrupted = await runMetrics(join(tiny.root, 'no-error'));
      expect(resumed.map((m) => m.step)).toEqual([1, 2, 3, 4]);
      for (const key of ['actor/pg_loss', 'critic/vf_loss', 'actor/grad_norm', 'critic/score/mean']) {
        expect(
          resumed.map((m) => m.data[key]),
          key,
        ).toEqual(uninterrupted.map((m) => m.data[key]));
      }
    },
  );

  it(
    'a final validation that fails leaves a resumable end: the same command runs only that validation, then has ' +
      'nothing left to do',
    async () => {
      const marker = join(tiny.root, 'judge-offline');
      await writeFile(marker, '');
      const judge = join(tiny.root, 'judge.mjs');
      // Validation rows carry their own data_source, so only the final validation meets the failing judge.
      const heldOut = join(tiny.root, 'held-out.jsonl');
      await writeFile(heldOut, (await readFile(val, 'utf8')).replaceAll('"arithmetic"', '"held_out"'));
      await writeFile(
        judge,
        `import { existsSync } from 'node:fs';\nexport function compute_score(source) {\n` +
          `  if (source === 'held_out' && existsSync(${JSON.stringify(marker)})) throw new Error('judge offline');\n ` +
          ` return 0;\n}\n`,
      );
      const dir = join(tiny.root, 'final');
      const args = [
        ...inDir('final'),
        `data.val_files=${heldOut}`,
        `custom_reward_function.path=${judge}`,
        'trainer.total_training_steps=1',
        'trainer.test_freq=1',
        'trainer.logger=[console,file]',
      ];
      const failed = await train(args);
      expect(failed.code).toBe(1);
      expect(failed.errors.at(-1)).toMatch(
        /^error: final validation failed \(the trained model is saved in \S+global_step_1; the same command runs the final validation again\): .*judge offline$/,
      );

      await rm(marker);
      const again = await train(args);
      expect(again.code).toBe(0);
      expect(again.errors.join('\n')).toContain(
        'is trained (step 1 of 1) but its final validation did not finish: running it now',
      );
      expect(again.stdout).toMatch(/validation @ step 1: score 0\.000 on 2 prompts/);
      expect(
        JSON.parse(await readFile(join(dir, 'global_step_1', 'trainer_state.json'), 'utf8')).finalValidationDone,
      ).toBe(true);
      const third = await train(args);
      expect(third.code).toBe(0);
      expect(third.errors.join('\n')).toContain('nothing to train: the run in');
      expect((await runMetrics(dir)).filter((m) => 'val/test_score/mean' in m.data)).toHaveLength(1);

      // trainer.val_only=true with resume_mode=auto validates the newest checkpoint of the run directory.
      const only = await train([...args, 'trainer.val_only=true']);
      expect(only.code).toBe(0);
      expect(only.stdout).toContain(`validating the checkpoint ${join(dir, 'global_step_1')} (trainer.val_only=true)`);
    },
  );

  it(
    'a truncated newest checkpoint is reported in one line, moved aside, and the run resumes from the one ' + 'before',
    async () => {
      const dir = join(tiny.root, 'fallback');
      expect((await train([...inDir('fallback'), 'trainer.total_training_steps=2', 'trainer.save_freq=1'])).code).toBe(
        0,
      );
      const weights = join(dir, 'global_step_2', 'actor', 'model.safetensors');
      await truncate(weights, Math.floor((await stat(weights)).size / 2));
      const outcome = await train([...inDir('fallback'), 'trainer.total_training_steps=3']);
      expect(outcome.code).toBe(0);
      expect(outcome.errors).toHaveLength(1);
      expect(outcome.errors[0]).toMatch(
        /^resume: \S+global_step_2 cannot be resumed \(.*model\.safetensors: .*\); moved it to \S+unreadable_global_step_2_\S+ and resuming from \S+global_step_1, the newest intact checkpoint$/,
      );
      const names = await readdir(dir);
      expect(names.filter((n) => n.startsWith('unreadable_global_step_2_'))).toHaveLength(1);
      expect(await stepDirs(dir)).toEqual(['global_step_1', 'global_step_3']);
      expect((await runMetrics(dir)).map((m) => m.step)).toEqual([1, 2, 3]);
    },
  );

  it('a batch larger than the data is refused before the run directory is touched', async () => {
    const dir = join(tiny.root, 'too-big');
    const outcome = await train([
      ...inDir('too-big'),
      'data.train_batch_size=100',
      'actor_rollout_ref.actor.ppo_mini_batch_size=100',
    ]);
    expect(outcome.code).toBe(1);
    expect(outcome.errors).toEqual([
      expect.stringMatching(/^error: data\.train_batch_size=100 is larger than the 6 training prompts/),
    ]);
    expect(await exists(dir)).toBe(false);
  });

  it('prompts dropped by data.filter_overlong_prompts are counted on stderr', async () => {
    const rows = (await readFile(join(tiny.root, 'train.jsonl'), 'utf8')).trim().split('\n');
    const long = JSON.parse(rows[0]);
    long.prompt[0].content = long.prompt[0].content.repeat(8);
    const data = join(tiny.root, 'with-long.jsonl');
    await writeFile(data, `${[...rows, JSON.stringify(long)].join('\n')}\n`);
    const outcome = await train([
      ...inDir('filtered'),
      `data.train_files=${data}`,
      'data.filter_overlong_prompts=true',
      'trainer.total_training_steps=1',
    ]);
    expect(outcome.code).toBe(0);
    expect(outcome.errors).toEqual([
      'data.train_files: filtered 1 of 7 prompts longer than data.max_prompt_length=16 tokens ' +
        '(data.filter_overlong_prompts=true); 6 left',
    ]);
  });

  it(
    'a reward module whose import never settles stops at custom_reward_function.timeout with that ' + 'message',
    async () => {
      const reward = join(tiny.root, 'import-hangs.mjs');
      await writeFile(reward, 'await new Promise(() => {});\nexport function compute_score() { return 0; }\n');
      const outcome = await train([
        ...inDir('import-hangs'),
        `custom_reward_function.path=${reward}`,
        'custom_reward_function.timeout=1',
      ]);
      expect(outcome.code).toBe(1);
      expect(outcome.errors).toEqual([
        expect.stringMatching(
          /^error: custom_reward_function\.path: cannot load \S+import-hangs\.mjs: importing it did not finish within custom_reward_function\.timeout=1 s$/,
        ),
      ]);
    },
  );

  describe('do_search probes retriever.url at start', () => {
    let server: Server;
    let url: string;
    beforeAll(async () => {
      server = createServer((_req, res) => res.end('{"oops": 1}'));
      await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
      url = `http://127.0.0.1:${(server.address() as { port: number }).port}/retrieve`;
      return () => new Promise<void>((done) => server.close(() => done()));
    });

    it('a server that answers in another shape is refused, quoting what came back', async () => {
      const outcome = await train([
        ...inDir('probe-shape'),
        'do_search=true',
        `retriever.url=${url}`,
        'retriever.max_retries=0',
      ]);
      expect(outcome.code).toBe(1);
      expect(outcome.errors).toEqual([
        expect.stringContaining(
          `error: retriever.url=${url}: the start-up probe (one search for "what is the capital of france") failed — ` +
            `retriever ${url}: `,
        ),
      ]);
      expect(await exists(join(tiny.root, 'probe-shape'))).toBe(false);
    });

    it('a server that is down is refused, naming the URL', async () => {
      const closed = await new Promise<string>((done) => {
        const probe = createServer();
        probe.listen(0, '127.0.0.1', () => {
          const port = (probe.address() as { port: number }).port;
          probe.close(() => done(`http://127.0.0.1:${port}/retrieve`));
        });
      });
      const outcome = await train([
        ...inDir('probe-down'),
        'do_search=true',
        `retriever.url=${closed}`,
        'retriever.max_retries=0',
        'retriever.timeout=2',
      ]);
      expect(outcome.code).toBe(1);
      expect(outcome.errors).toEqual([
        expect.stringMatching(
          new RegExp(
            `^error: retriever\\.url=${closed.replace(/[.:/]/g, '\\$&')}: the start-up probe .* failed — retriever \\S+: no answer after 1 attempt; last: .*ECONNREFUSED`,
          ),
        ),
      ]);
    });
  });
});
