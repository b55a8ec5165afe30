// Hydra's primary config (`--config-path=DIR --config-name=NAME`, `-cp`/`-cn`) through `node train.js --cfg job`:
// the named file over verl's defaults through its defaults list, then key=value overrides; a missing file, a key
// the schema does not know and a second primary config are refused in one line naming the file or the option.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { mkdtemp, writeFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { parse as parseYaml } from 'yaml';
import { runCli } from '../support/run-cli.ts';

const MODEL = 'actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct';
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'hydra-primary-'));
  // As verl's recipe and example configs are written: verl's ppo_trainer first, the file's own keys over it.
  await writeFile(
    join(dir, 'my_grpo.yaml'),
    [
      'hydra:',
      '  searchpath:',
      '    - file://verl/trainer/config',
      'defaults:',
      '  - ppo_trainer',
      '  - my_lengths',
      '  - _self_',
      'algorithm:',
      '  adv_estimator: grpo',
      'data:',
      '  max_prompt_length: 256',
      'actor_rollout_ref:',
      '  rollout:',
      '    n: 4',
      '',
    ].join('\n'),
  );
  await writeFile(join(dir, 'my_lengths.yaml'), 'data:\n  max_prompt_length: 128\n  max_response_length: 64\n');
  await writeFile(join(dir, 'typo.yaml'), 'defaults:\n  - ppo_trainer\n  - _self_\ndata:\n  max_promt_length: 64\n');
  await writeFile(join(dir, 'missing_entry.yaml'), 'defaults:\n  - ppo_trainer\n  - not_here\n');
});
afterAll(() => rm(dir, { recursive: true, force: true }));

async function composed(argv: string[]) {
  const { code, stdout, stderr } = await runCli(['--cfg', 'job', ...argv]);
  expect(code, stderr).toBe(0);
  return { config: parseYaml(stdout), stderr };
}

async function refused(argv: string[]): Promise<string> {
  const { code, stderr } = await runCli(['--cfg', 'job', ...argv]);
  expect(code).toBe(2);
  expect(stderr.trim().split('\n')).toHaveLength(1);
  return stderr;
}

describe('--config-path / --config-name', () => {
  it(
    "composes the named file over verl's defaults, its defaults list in order (_self_ last), overrides on " + 'top',
    async () => {
      const { config, stderr } = await composed([
        `--config-path=${dir}`,
        '--config-name=my_grpo',
        MODEL,
        'actor_rollout_ref.rollout.n=8',
      ]);
      expect(config.algorithm.adv_estimator).toBe('grpo');
      expect(config.data.max_prompt_length).toBe(256);
      expect(config.data.max_response_length).toBe(64);
      expect(config.actor_rollout_ref.rollout.n).toBe(8);
      // Not the built-in job's layer: verl's defaults stand under the file.
      expect(config.data.train_batch_size).toBe(1024);
      expect(stderr).toContain(
        "skipped the hydra: block (Hydra's own settings (run directory, job name; searchpath: verl's own configs are " +
          'built in))',
      );
    },
  );

  it("takes Hydra's other spellings: --config-path DIR, -cp/-cn, NAME.yaml", async () => {
    for (const argv of [
      ['--config-path', dir, '--config-name', 'my_grpo'],
      ['-cp', dir, '-cn', 'my_grpo.yaml'],
      [`-cp=${dir}`, '-cn=my_grpo'],
    ]) {
      expect((await composed([...argv, MODEL])).config.data.max_prompt_length).toBe(256);
    }
  });

  it(
    "--config-name=ppo_trainer, with no folder or verl's relative config folder, is verl's own config: the schema's " +
      'defaults',
    async () => {
      for (const argv of [
        ['--config-name=ppo_trainer'],
        ['--config-path=config', '--config-name=ppo_trainer.yaml'],
        // verl's Megatron config is the same defaults with Megatron sharding, which means nothing on one adapter.
        ['--config-name=ppo_megatron_trainer'],
        ['--config-path=./config', '--config-name=ppo_megatron_trainer'],
      ]) {
        const { config } = await composed([...argv, MODEL]);
        expect(config.data.max_prompt_length).toBe(512);
        expect(config.data.train_batch_size).toBe(1024);
      }
    },
  );

  it("verl's multi-turn example config is read: its multi_turn keys over verl's defaults", async () => {
    const { config } = await composed([
      '--config-path=test/support/data/verl-b178a3cd/examples/sglang_multiturn/config',
      '--config-name=gsm8k_multiturn_grpo',
      MODEL,
    ]);
    expect(config.actor_rollout_ref.rollout.multi_turn).toEqual({
      enable: true,
      tool_config_path: null,
      max_assistant_turns: 5,
      max_user_turns: null,
      max_parallel_calls: 1,
      max_tool_response_length: 256,
      tool_response_truncate_side: 'middle',
      format: 'hermes',
    });
  });

  it(
    'refuses a missing file, a missing defaults entry, an unknown key, and --config beside --config-name, in one ' +
      'line each',
    async () => {
      expect(await refused([`--config-path=${dir}`, '--config-name=nope', MODEL])).toContain(
        `${join(dir, 'nope.yaml')} does not exist`,
      );
      expect(await refused([`--config-path=${dir}`, '--config-name=missing_entry', MODEL])).toMatch(
        /missing_entry\.yaml defaults entry not_here: .*not_here\.yaml does not exist/,
      );
      expect(await refused([`--config-path=${dir}`, '--config-name=typo', MODEL])).toContain(
        `unknown key data.max_promt_length (${join(dir, 'typo.yaml')}) — did you mean data.max_prompt_length?`,
      );
      expect(await refused(['--config-name=gsm8k_multiturn_grpo', MODEL])).toContain(
        'only ppo_trainer and ppo_megatron_trainer are built in',
      );
      expect(
        await refused(['--config', 'examples/search_r1_tiny.yaml', `--config-path=${dir}`, '--config-name=my_grpo']),
      ).toContain('both name the primary config');
    },
  );
});
