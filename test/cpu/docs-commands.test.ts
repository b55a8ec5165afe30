// Every command in README.md and docs/*.md runs as written: the lines of each sh/bash/console code block (a console
// block's commands are its `$ ` lines; a `text` block is illustrative output and is not read) are split into simple
// commands, and each must name something that exists. `node train.js …` is run with `--cfg job` appended (Hydra's:
// compose the config and exit before any device is created), so a mistyped key, a bad value or an impossible
// combination fails here; `node <script>` and `bash <script>` need the script, `tools/bench.js` a suite it knows,
// `npm test`/`npm run X` a package.json script, `npx vitest run PATH` the path.
import { describe, it, expect, beforeAll } from 'vitest';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Programs outside this repository that a doc may show; nothing of theirs is checked. */
const EXTERNAL = new Set(['tensorboard', 'wandb', 'huggingface-cli', 'git', 'cd']);
/** `node train.js --cfg job` processes at once: each is a Node start plus the TypeScript loader, about 1 s of CPU. */
const PARALLEL_CFG_JOBS = 4;

interface DocCommand {
  /** Where it is written, as `docs/training.md:42`. */
  where: string;
  /** The command's words, quotes removed, environment assignments in front dropped. */
  words: string[];
}

function docFiles(): string[] {
  const docs = readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`);
  return ['README.md', ...docs];
}

/** The shell lines of a file's sh/bash/console blocks, continuation lines (a trailing `\`) joined. */
function shellLines(file: string): { line: number; text: string }[] {
  const lines = readFileSync(join(ROOT, file), 'utf8').split('\n');
  const out: { line: number; text: string }[] = [];
  let fence: string | null = null;
  let pending: { line: number; text: string } | null = null;
  lines.forEach((raw, i) => {
    const open = /^\s*```(\S*)/.exec(raw);
    if (open) {
      if (fence === null) fence = open[1];
      else {
        if (pending) throw new Error(`${file}:${pending.line}: a command ends in '\\' at the end of its code block`);
        fence = null;
      }
      return;
    }
    if (fence === null || !['sh', 'bash', 'console', 'shell'].includes(fence)) return;
    let text = raw;
    if (fence === 'console' && !pending) {
      if (!/^\s*\$ /.test(text)) return;
      text = text.replace(/^\s*\$ /, '');
    }
    if (pending) pending.text += ` ${text.trim()}`;
    else pending = { line: i + 1, text };
    if (/\\\s*$/.test(pending.text)) pending.text = pending.text.replace(/\\\s*$/, '');
    else {
      out.push(pending);
      pending = null;
    }
  });
  return out;
}

/** Shell words and the operators between simple commands (`&&`, `||`, `;`, `|`, `&`); a `#` word starts a comment. */
function shellWords(text: string, where: string): string[][] {
  const commands: string[][] = [[]];
  let word: string | null = null;
  const end = () => {
    if (word !== null) commands[commands.length - 1].push(word);
    word = null;
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "'" || c === '"') {
      const close = text.indexOf(c, i + 1);
      if (close < 0) throw new Error(`${where}: unclosed ${c} in: ${text}`);
      word = (word ?? '') + text.slice(i + 1, close);
      i = close;
    } else if (/\s/.test(c)) end();
    else if (c === '#' && word === null) break;
    else if ('&|;'.includes(c)) {
      end();
      if (text[i + 1] === c) i++;
      commands.push([]);
    } else word = (word ?? '') + c;
  }
  end();
  return commands
    .map((words) => words.slice(words.findIndex((w) => !/^[A-Za-z_][A-Za-z0-9_]*=/.test(w))))
    .filter((words) => words.length > 0 && !words.every((w) => /^[A-Za-z_][A-Za-z0-9_]*=/.test(w)));
}

function docCommands(): DocCommand[] {
  return docFiles().flatMap((file) =>
    shellLines(file).flatMap(({ line, text }) =>
      shellWords(text, `${file}:${line}`).map((words) => ({ where: `${file}:${line}`, words })),
    ),
  );
}

/** GitHub's anchors of a markdown file's headings. */
function headingSlugs(path: string): string[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => /^#{1,6} /.test(l))
    .map((l) =>
      l
        .replace(/^#+ /, '')
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N} _-]/gu, '')
        .replace(/ /g, '-'),
    );
}

/** The script a `node` command runs: its first word that is not an option or an option's value. */
function nodeScript(words: string[]): { script: string; args: string[] } | null {
  for (let i = 1; i < words.length; i++) {
    if (words[i] === '--import' || words[i] === '--require' || words[i] === '-r') i++;
    else if (!words[i].startsWith('-')) return { script: words[i], args: words.slice(i + 1) };
  }
  return null;
}

function runCfgJob(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['train.js', ...args, '--cfg', 'job'], {
      cwd: ROOT,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk) => {
      stderr += String(chunk);
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

/** Runs the jobs with at most `limit` at a time, results in order. */
async function pool<T>(jobs: (() => Promise<T>)[], limit: number): Promise<T[]> {
  const results: T[] = new Array(jobs.length);
  let next = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const i = next++;
      results[i] = await jobs[i]();
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, jobs.length) }, worker));
  return results;
}

const commands = docCommands();
const trainCommands = commands.filter((c) => c.words[0] === 'node' && nodeScript(c.words)?.script === 'train.js');
const packageScripts: Record<string, string> = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts;
const benchSource = readFileSync(join(ROOT, 'tools/bench/cli.ts'), 'utf8');

describe('commands in README.md and docs/', () => {
  it('finds the README commands that .ci/run and a newcomer type', () => {
    const lines = commands.filter((c) => c.where.startsWith('README.md:')).map((c) => c.words.join(' '));
    expect(lines).toContain('bash tools/setup.sh');
    expect(lines).toContain('node train.js');
    expect(lines).toContain('npm test');
  });

  it('README.md links every doc, and every relative link and anchor resolves', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    for (const doc of docFiles().slice(1)) expect(readme, `README.md does not link ${doc}`).toContain(`](${doc})`);
    for (const file of docFiles()) {
      for (const [, target] of readFileSync(join(ROOT, file), 'utf8').matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target)) continue;
        const [path, anchor] = target.split('#');
        const resolved = path ? join(ROOT, dirname(file), path) : join(ROOT, file);
        expect(existsSync(resolved), `${file}: link to ${target}: no such file`).toBe(true);
        if (anchor) expect(headingSlugs(resolved), `${file}: link to ${target}: no such heading`).toContain(anchor);
      }
    }
  });

  describe('node train.js lines compose with --cfg job', () => {
    // The same line in two docs is composed once.
    const argvs = [...new Set(trainCommands.map((c) => JSON.stringify(nodeScript(c.words)!.args)))];
    const results = new Map<string, { code: number | null; stderr: string }>();
    beforeAll(async () => {
      const done = await pool(
        argvs.map((argv) => () => runCfgJob(JSON.parse(argv))),
        PARALLEL_CFG_JOBS,
      );
      argvs.forEach((argv, i) => results.set(argv, done[i]));
    }, 240_000);
    for (const c of trainCommands) {
      it(`${c.where}: ${c.words.join(' ')}`, () => {
        const { code, stderr } = results.get(JSON.stringify(nodeScript(c.words)!.args))!;
        expect(code, `${c.where}: node train.js ${nodeScript(c.words)!.args.join(' ')} --cfg job\n${stderr}`).toBe(0);
      });
    }
  });

  for (const c of commands.filter((c) => !trainCommands.includes(c))) {
    it(`${c.where}: ${c.words.join(' ')}`, () => {
      const [program, ...args] = c.words;
      if (program === 'node') {
        const run = nodeScript(c.words);
        expect(run, `${c.where}: node without a script`).not.toBeNull();
        expect(existsSync(join(ROOT, run!.script)), `${c.where}: no file ${run!.script}`).toBe(true);
        if (run!.script === 'tools/bench.js') {
          const suite = run!.args.find((a) => !a.startsWith('-'));
          expect(
            suite && (benchSource.includes(`'${suite}'`) || benchSource.includes(`  ${suite}:`)),
            `${c.where}: tools/bench.js has no suite '${suite}'`,
          ).toBeTruthy();
        }
      } else if (program === 'bash' || program === 'python3') {
        expect(existsSync(join(ROOT, args[0])), `${c.where}: no file ${args[0]}`).toBe(true);
      } else if (program === 'npm') {
        const script = args[0] === 'run' ? args[1] : args[0];
        expect(packageScripts[script], `${c.where}: package.json has no script '${script}'`).toBeDefined();
      } else if (program === 'npx') {
        expect(['vitest', 'tsc'], `${c.where}: npx ${args[0]}`).toContain(args[0]);
        for (const path of args.filter((a) => /^(test|tools|demo)\//.test(a))) {
          expect(existsSync(join(ROOT, path)), `${c.where}: no file ${path}`).toBe(true);
        }
      } else {
        expect(
          EXTERNAL.has(program),
          `${c.where}: '${program}' is neither this project's nor a known outside program ` +
            '(fence illustrative lines as text)',
        ).toBe(true);
      }
    });
  }
});
