// The SFT job's command line: verl's sft_trainer.yaml defaults, its launch arguments as written, one clear line per
// problem.
import { describe, it, expect } from 'vitest';
import { parseSftOverrides, sftLoraSettings, SFT_DEFAULTS } from '../../ppo/sft/sft-config.ts';
import { jobOverrides } from '../../ppo/jobs/supervised-command-node.ts';
import { parseRewardOverrides } from '../../ppo/reward-model/reward-config.ts';

const required = ['data.train_files=train.parquet', 'model.partial_pretrain=/models/qwen3'];

describe('SFT config', () => {
  it("keeps verl's defaults and interpolates trainer.default_local_dir", () => {
    const { config } = parseSftOverrides([
      ...required,
      'trainer.project_name=p',
      '+trainer.experiment_name=e',
      'optim.lr=1e-4',
      "data.prompt_dict_keys=['q']",
    ]);
    expect(config.trainer.default_local_dir).toBe('checkpoints/p/e');
    expect(config.optim).toEqual({ ...SFT_DEFAULTS.optim, lr: 1e-4 });
    expect(config.data.prompt_dict_keys).toEqual(['q']);
    expect(config.data.micro_batch_size_per_gpu).toBe(4);
    expect(config.data.train_batch_size).toBe(256);
  });

  it("reads verl's LoRA keys as PEFT's settings", () => {
    expect(sftLoraSettings(parseSftOverrides(required).config.model)).toBeNull();
    expect(sftLoraSettings(parseSftOverrides([...required, 'model.lora_rank=8']).config.model)).toEqual({
      rank: 8,
      alpha: 16,
      useRslora: false,
      targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'],
    });
    expect(
      sftLoraSettings(
        parseSftOverrides([
          ...required,
          'model.lora_rank=4',
          'model.lora_alpha=8',
          'model.target_modules=[v_proj,q_proj]',
        ]).config.model,
      ),
    ).toEqual({ rank: 4, alpha: 8, useRslora: false, targetModules: ['q_proj', 'v_proj'] });
  });

  it('drops a verl launch prefix and names every problem with a suggestion', () => {
    expect(
      jobOverrides('sft', ['torchrun', '--nproc_per_node=8', '-m', 'verl.trainer.fsdp_sft_trainer', 'a=1']),
    ).toEqual(['a=1']);
    expect(() => jobOverrides('sft', ['python3', '-m', 'verl.trainer.main_ppo'])).toThrow(
      /node sft.js runs verl.trainer.fsdp_sft_trainer/,
    );
    expect(() =>
      parseSftOverrides([
        ...required,
        'optim.learning_rate=1',
        'data.truncation=middle',
        'data.train_batch_size=10',
        'model.target_modules=[q_proj,qkv]',
      ]),
    ).toThrow(
      expect.objectContaining({
        problems: [
          expect.stringMatching(/^unknown key optim.learning_rate/),
          'data.truncation=middle: expected one of error, left, right',
          'data.train_batch_size=10 is not a multiple of data.micro_batch_size_per_gpu=4 (a step is whole ' +
            'micro-batches)',
          "model.target_modules: unknown module 'qkv'; expected 'all-linear' or names from q_proj, k_proj, v_proj, " +
            'o_proj, gate_proj, up_proj, down_proj',
        ],
      }),
    );
    expect(() => parseSftOverrides([])).toThrow(
      expect.objectContaining({
        problems: [
          expect.stringMatching(/^data.train_files is required/),
          expect.stringMatching(/^model.partial_pretrain is required/),
        ],
      }),
    );
  });

  it(
    'refuses an empty trainer.default_local_dir (it would write into the current directory) and betas that are not ' +
      'two, naming the key, in the SFT and reward-model jobs alike',
    () => {
      for (const parse of [parseSftOverrides, parseRewardOverrides]) {
        expect(() => parse([...required, 'trainer.default_local_dir='])).toThrow(
          /^trainer\.default_local_dir is empty: the run would write its checkpoints and metrics into the current directory/,
        );
        expect(() => parse([...required, 'optim.betas=[0.9]'])).toThrow(
          'optim.betas must be two numbers in [0, 1) (beta1, beta2), got [0.9]',
        );
      }
    },
  );
});
