// tools/rlhf-pipeline.js stopped and resumed as users stop it: SIGTERM reaches the running stage once, which saves
// its last completed step; the pipeline names what was saved and the command that continues, and exits 143; the same
// command skips the finished stages and resumes the interrupted one from its checkpoint. A kill -9 of the pipeline
// leaves no stage process behind (ps).
import { describe, it, expect } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { alive, childrenOf, isNode, sleep, survivors } from '../support/processes.ts';
import { makeTempDir } from '../support/temp-dir.ts';

const PIPELINE = fileURLToPath(new URL('../../tools/rlhf-pipeline.js', import.meta.url));

interface Pipeline {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<number | null>;
}

function startPipeline(out: string): Pipeline {
  const child = spawn(process.execPath, [PIPELINE, '--out', out], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c) => (stdout += c));
  child.stderr!.on('data', (c) => (stderr += c));
  const exit = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
  return { child, stdout: () => stdout, stderr: () => stderr, exit };
}

/** How long a stage's processes may outlive the pipeline: a tied child looks for its parent every 200 ms, which a
 *  loaded machine may delay by seconds; a stage left running would go on for minutes. */
const OUTLIVE_MS = 30_000;

async function waitFor(run: Pipeline, pattern: RegExp): Promise<void> {
  for (let i = 0; i < 6000 && !pattern.test(run.stdout()); i++) await sleep(50);
  expect(run.stdout()).toMatch(pattern);
}

/** The pipeline's stage processes: the entry point it started and that one's worker. */
const descendants = (pid: number) => childrenOf(pid).flatMap((c) => [c, ...childrenOf(c)]);

describe('node tools/rlhf-pipeline.js: stopped and resumed', () => {
  it('SIGTERM during the reward-model stage saves it, names what was saved and exits 143; the same command skips ' +
    'SFT and resumes the reward model from its checkpoint', { timeout: 600_000 }, async () => {
    const out = await makeTempDir('pipeline-');
    const first = startPipeline(out);
    await waitFor(first, /reward model: .*\n(.*\n)*step 2\/32/);
    // The stage's launcher and its worker, and whatever else they run at that moment: none may survive the stop.
    const stage = descendants(first.child.pid!);
    expect(stage.length).toBeGreaterThanOrEqual(2);
    first.child.kill('SIGTERM');
    expect(await first.exit).toBe(143);
    expect(await survivors(stage, OUTLIVE_MS)).toEqual([]);
    const rmSteps = (await readdir(join(out, 'rm'))).filter((n) => /^global_step_\d+$/.test(n));
    expect(rmSteps.length).toBe(1);
    const stopLine = first
      .stderr()
      .split('\n')
      .find((l) => l.includes('the pipeline stopped'));
    // The pipeline prints paths as its stages' command lines do: relative to the working directory.
    const rel = (path: string) => relative(process.cwd(), path);
    const rmCheckpoint = rel(join(out, 'rm', rmSteps[0]));
    expect(stopLine).toBe(
      `SIGTERM: stopped reward-model.js (status 143); the pipeline stopped in its rm stage. Saved: sft ` +
        `(${rel(join(out, 'sft'))}), rm up to ${rmCheckpoint}. \`node tools/rlhf-pipeline.js --out ` +
        `${rel(out)}\` continues with the rm stage, resuming from ${rmCheckpoint}`,
    );
    // The stage got the signal once: it finished its step and saved it (a second would have abandoned it).
    expect(first.stderr()).toMatch(/interrupted by SIGTERM after step \d+/);

    const again = startPipeline(out);
    expect(await again.exit).toBe(0);
    expect(again.stdout()).toContain(`sft: finished in an earlier run`);
    expect(again.stdout()).not.toContain('$ node sft.js');
    expect(again.stdout()).toContain(`resuming from ${join(out, 'rm', rmSteps[0])}`);
    expect(again.stdout()).toContain('RLHF pipeline figures');
    const state = JSON.parse(await readFile(join(out, 'pipeline.json'), 'utf8'));
    expect(Object.keys(state.finished)).toEqual(['sft', 'rm', 'ppo']);
  });

  it('kill -9 of the pipeline ends its running stage (launcher and worker) too', async () => {
    const out = await makeTempDir('pipeline-');
    const run = startPipeline(out);
    await waitFor(run, /step 1\/20/);
    const stage = descendants(run.child.pid!).filter(isNode);
    expect(stage.length).toBe(2);
    expect(stage.every(alive)).toBe(true);
    run.child.kill('SIGKILL');
    await run.exit;
    expect(await survivors(stage, OUTLIVE_MS)).toEqual([]);
  });

  it('refuses a non-empty --out that is not a pipeline directory', async () => {
    const run = startPipeline(fileURLToPath(new URL('../../docs', import.meta.url)));
    expect(await run.exit).toBe(1);
    expect(run.stderr()).toMatch(/docs: not empty and not a pipeline's directory \(no pipeline\.json\)/);
  });
});
