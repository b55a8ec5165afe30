// What a run does to its run directory: nothing until every input has been read (a bad path leaves the previous
// run's metrics alone), auto-resume only of a checkpoint of the configured model, and a console-only run that
// ends without charts instead of failing to draw them.
import { describe, it, expect } from 'vitest';
import { cp, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { plotRun } from '../../tools/plot/cli.ts';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';
import { runCli } from '../support/run-cli.ts';
import { readEvents } from '../support/tensorboard-reader.ts';
import { runTrainerIo } from '../../ppo/jobs/builtin-run.ts';
import { PromptSampler } from '../../ppo/data/dataset.ts';

describe('run directory', () => {
  it('keeps a finished run safe from a bad restart and from a checkpoint of another model', async () => {
    const arithmetic = await makeTinyRun(4);
    const dir = join(arithmetic.root, 'run');
    const oneStep = ['trainer.total_training_steps=1', `trainer.default_local_dir=${dir}`];
    expect((await runCli([...arithmetic.overrides, ...oneStep])).code).toBe(0);
    const metrics = await readFile(join(dir, 'metrics.jsonl'), 'utf8');
    expect(metrics).toContain('"step":1');
    // verl's names for the GAE run's value fit and prompt lengths.
    for (const name of [
      'training/epoch',
      'critic/vf_explained_var',
      'prompt_length/max',
      'prompt_length/min',
      'prompt_length/clip_ratio',
      'response_length/clip_ratio',
    ])
      expect(metrics).toContain(`"${name}":`);

    await expect(
      runCli([
        ...arithmetic.overrides,
        ...oneStep,
        'trainer.resume_mode=disable',
        'data.train_files=/nonexistent/train.parquet',
      ]),
    ).rejects.toThrow('/nonexistent/train.parquet');
    expect(await readFile(join(dir, 'metrics.jsonl'), 'utf8')).toBe(metrics);

    const search = await makeTinyRun(4, 'search_qa');
    const otherModel = search.overrides.find((o) => o.startsWith('actor_rollout_ref.model.path='))!;
    await expect(
      runCli([
        ...arithmetic.overrides,
        otherModel,
        'trainer.total_training_steps=2',
        `trainer.default_local_dir=${dir}`,
      ]),
    ).rejects.toThrow(
      /resume: the checkpoint .*global_step_1 holds a different model than actor_rollout_ref.model.path=.* \(vocabSize \d+ vs \d+\)/,
    );
  });

  it(
    'a run without the file logger ends without charts; TENSORBOARD_DIR places the event files, as in ' + 'verl',
    async () => {
      const { root, overrides } = await makeTinyRun(4);
      const tensorboardDir = join(root, 'tb');
      const { code, stdout } = await runCli(
        [
          ...overrides,
          'trainer.total_training_steps=1',
          `trainer.default_local_dir=${join(root, 'console')}`,
          'trainer.logger=[console,tensorboard]',
        ],
        { TENSORBOARD_DIR: tensorboardDir },
        { writeCharts: plotRun },
      );
      expect(code).toBe(0);
      expect(stdout).toContain('done in');
      expect(stdout).not.toContain('charts:');
      expect(stdout).toContain(`tensorboard: ${tensorboardDir}/events.out.tfevents.`);
      expect(await readdir(tensorboardDir)).toHaveLength(1);
    },
  );

  it('a run without the console logger prints nothing on stdout, but its notes and errors on stderr', async () => {
    const { root, overrides } = await makeTinyRun(4);
    const wandbOnly = [
      ...overrides,
      'trainer.total_training_steps=1',
      `trainer.default_local_dir=${join(root, 'wandb')}`,
      'trainer.logger=[wandb]',
    ];
    const run = await runCli(wandbOnly);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain('trainer.logger: skipped wandb');
    const valOnly = await runCli([...wandbOnly, 'trainer.val_only=true']);
    expect(valOnly).toMatchObject({ code: 1, stdout: '' });
    expect(valOnly.stderr).toContain('error: trainer.val_only=true but there is no validation set (data.val_files)');
  });

  it(
    'trainer.save_freq=-1 and test_freq=-1 save and validate nothing, not even at the end (verl); the summary says ' +
      'so',
    async () => {
      const { root, overrides } = await makeTinyRun(4);
      const data = overrides.find((o) => o.startsWith('data.train_files='))!.split('=')[1];
      const dir = join(root, 'never');
      const { code, stdout } = await runCli([
        ...overrides,
        'trainer.total_training_steps=2',
        `data.val_files=${data}`,
        'trainer.save_freq=-1',
        'trainer.test_freq=-1',
        'trainer.val_before_train=true',
        'trainer.logger=[console,file]',
        `trainer.default_local_dir=${dir}`,
      ]);
      expect(code).toBe(0);
      expect((await readdir(dir)).filter((name) => name.startsWith('global_step_'))).toEqual([]);
      // verl's val_before_train, whatever test_freq says; nothing after it.
      expect((await runMetrics(dir)).map((m) => m.step)).toEqual([0, 1, 2]);
      expect(stdout).toContain('no checkpoint of step 2 (trainer.save_freq=-1)');
      expect(stdout).toContain('validation @ step 0');
      expect(stdout).not.toContain('validation @ step 2');
      expect(stdout).not.toContain('validation score:');
    },
  );

  it(
    "saved actors carry the model's generation_config.json as read, and its eos_token_id list ends responses (as " +
      'vLLM)',
    async () => {
      const { root, overrides } = await makeTinyRun(4);
      const model = overrides.find((o) => o.startsWith('actor_rollout_ref.model.path='))!.split('=')[1];
      const eosTokenIds = [
        JSON.parse(await readFile(join(model, 'config.json'), 'utf8')).eos_token_id,
      ].flat() as number[];
      // Qwen's layout: config.json names <|im_end|>, generation_config.json adds <|endoftext|> and sampling defaults.
      const generation = {
        bos_token_id: 1,
        do_sample: true,
        eos_token_id: [...eosTokenIds, 7],
        pad_token_id: 0,
        temperature: 0.6,
        top_k: 20,
        top_p: 0.95,
      };
      await writeFile(join(model, 'generation_config.json'), JSON.stringify(generation));
      const dir = join(root, 'generation');
      expect(
        (await runCli([...overrides, 'trainer.total_training_steps=1', `trainer.default_local_dir=${dir}`])).code,
      ).toBe(0);
      expect(JSON.parse(await readFile(join(dir, 'global_step_1', 'actor', 'generation_config.json'), 'utf8'))).toEqual(
        generation,
      );
      const run = {
        tokenizer: {} as never,
        train: [],
        val: [],
        actor: { config: { eosTokenIds, padTokenId: 0 } } as never,
        reward: () => 0,
        search: null,
      };
      const sampler = new PromptSampler(4, { batchSize: 4, shuffle: false, seed: 1 });
      expect(
        runTrainerIo({ ...run, generationConfig: { eosTokenIds: generation.eos_token_id } }, sampler).io.eosTokenIds,
      ).toEqual(generation.eos_token_id);
      expect(runTrainerIo({ ...run, generationConfig: null }, sampler).io.eosTokenIds).toEqual(eosTokenIds);
    },
  );

  it(
    'model families the engine lacks (Gemma2, Mistral) fail at load with one line naming what is ' + 'supported',
    async () => {
      const { root, overrides } = await makeTinyRun(4);
      const model = overrides.find((o) => o.startsWith('actor_rollout_ref.model.path='))!.split('=')[1];
      for (const [architecture, modelType] of [
        ['Gemma2ForCausalLM', 'gemma2'],
        ['MistralForCausalLM', 'mistral'],
      ]) {
        const dir = join(root, modelType);
        await cp(model, dir, { recursive: true });
        const config = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'));
        await writeFile(
          join(dir, 'config.json'),
          JSON.stringify({ ...config, architectures: [architecture], model_type: modelType }),
        );
        const { code, stderr } = await runCli([
          ...overrides,
          `actor_rollout_ref.model.path=${dir}`,
          `trainer.default_local_dir=${join(root, `run-${modelType}`)}`,
        ]);
        expect(code).toBe(1);
        expect(stderr.trim().split('\n')).toHaveLength(1);
        expect(stderr).toContain(`unsupported architecture ${architecture} (supported: LlamaForCausalLM`);
      }
    },
  );

  it('trainer.val_only validates and stops; trainer.log_val_generations prints that many samples', async () => {
    const { root, overrides } = await makeTinyRun(4);
    const data = overrides.find((o) => o.startsWith('data.train_files='))!.split('=')[1];
    const dir = join(root, 'val-only');
    const { code, stdout } = await runCli([
      ...overrides,
      `data.val_files=${data}`,
      'trainer.val_only=true',
      'trainer.log_val_generations=3',
      'trainer.logger=["console","file","tensorboard"]',
      `trainer.default_local_dir=${dir}`,
    ]);
    expect(code).toBe(0);
    expect(stdout).toContain('validation only: score');
    // How long validation took (verl's timing_s/testing), on the console line too: a whole test set is minutes.
    expect(stdout).toMatch(/validation @ step 0: score [\d.]+ on 4 prompts in [\d.]+s \(\d+ generated tok\/s\)/);
    expect(stdout.match(/\[prompt\] .* \[response\] .* \[score\] /g)).toHaveLength(3);
    // …and gives TensorBoard's Text tab the same samples, a markdown table under val/generations.
    const [eventFile] = await readdir(join(dir, 'tensorboard'));
    const texts = readEvents(new Uint8Array(await readFile(join(dir, 'tensorboard', eventFile))))
      .flatMap((event) => event.summary?.value ?? [])
      .filter((value: { tag: string }) => value.tag === 'val/generations');
    expect(texts).toHaveLength(1);
    const table = new TextDecoder().decode(texts[0].tensor.stringVal[0]).split('\n');
    expect(table.slice(0, 2)).toEqual(['| input | output | score |', '| --- | --- | --- |']);
    expect(table).toHaveLength(2 + 3);
    expect(stdout).not.toContain('PPO:');
    // verl's name for a data source's validation score.
    const [validation] = await runMetrics(dir);
    expect(validation.data['val-core/arithmetic/reward/mean@1']).toBe(validation.data['val/test_score/mean']);
    expect(validation.data['timing_s/testing']).toBeGreaterThan(0);
    expect(validation.data['val/response_tokens_per_s']).toBeGreaterThan(0);
  });

  it(
    "validation logs verl's val-core and val-aux metrics: n = 2 samples per prompt, a reward returning {score, " +
      'correct, source}',
    async () => {
      const { root, overrides } = await makeTinyRun(4);
      const data = overrides.find((o) => o.startsWith('data.train_files='))!.split('=')[1];
      const dir = join(root, 'val-aux');
      const reward = fileURLToPath(new URL('../support/data/custom-reward.ts', import.meta.url));
      const { code } = await runCli([
        ...overrides,
        `data.val_files=${data}`,
        'trainer.val_only=true',
        'actor_rollout_ref.rollout.val_kwargs.n=2',
        'actor_rollout_ref.rollout.val_kwargs.do_sample=true',
        'actor_rollout_ref.rollout.val_kwargs.temperature=1',
        `custom_reward_function.path=${reward}`,
        `trainer.default_local_dir=${dir}`,
      ]);
      expect(code).toBe(0);
      const [validation] = await runMetrics(dir);
      // reward, and the dict's numeric entries (score, the boolean correct); the string source is left out.
      const per = (variable: string) =>
        ['mean@2', 'std@2', 'best@2/mean', 'best@2/std', 'worst@2/mean', 'worst@2/std'].map((m) => `${variable}/${m}`);
      const core = ['reward/mean@2', 'reward/best@2/mean', 'reward/best@2/std'];
      const expected = [...per('reward'), ...per('score'), ...per('correct')].map(
        (m) => `${core.includes(m) ? 'val-core' : 'val-aux'}/arithmetic/${m}`,
      );
      expect(
        Object.keys(validation.data)
          .filter((k) => k.startsWith('val-'))
          .sort(),
      ).toEqual(expected.sort());
      expect(validation.data['val-core/arithmetic/reward/mean@2']).toBeCloseTo(
        validation.data['val/test_score/mean'],
        12,
      );
      expect(validation.data['val-aux/arithmetic/score/mean@2']).toBeCloseTo(
        validation.data['val/test_score/mean'],
        12,
      );
    },
  );
});
