// The SFT job at a tiny size on real files: a Qwen3-shaped checkpoint with its tokenizer, JSONL rows in verl's SFT
// shape, gradient accumulation over micro-batches, validation loss, HF checkpoints with the optimizer state, and a
// resumed run that continues exactly as the uninterrupted one; with model.lora_rank, only PEFT adapters train and
// the checkpoint's adapter, loaded back as PPO loads an actor's, scores as the trained model did.
import { describe, it, expect } from 'vitest';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gpuEngine } from '../support/gpu-engine.ts';
import { makeTinySftRun as tinySftRun } from '../support/tiny-run.ts';
import { parseSftOverrides } from '../../ppo/sft/sft-config.ts';
import { modelTokenizer, adamwOf, runSftJob } from '../../ppo/jobs/sft-job-node.ts';
import { buildSftExamples } from '../../ppo/sft/sft-dataset.ts';
import { SftTrainer } from '../../ppo/sft/sft-trainer.ts';
import { LORA_ADAPTER_DIR } from '../../models/lora-files-node.ts';
import { readRlRecords } from '../../ppo/data/dataset-node.ts';
import { AdamWOptimizer } from '../../ppo/training/adamw-optimizer.ts';
import { loadModel } from '../../models/model-files-node.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { loadLoraAdapter, readLoraAdapter } from '../../models/lora-files-node.ts';
import { readHfTensors } from '../../models/parameter-store.ts';

type JobResult = Awaited<ReturnType<typeof runSftJob>>;
const losses = (result: JobResult) => result.history.map((m) => m['train/loss']);

describe('SFT job', () => {
  it('trains, validates, saves HF checkpoints and resumes where it stopped', async () => {
    const engine = await gpuEngine();
    const { root, launch } = await tinySftRun();
    const run = (dir: string, steps: number) => {
      const { config, notes } = parseSftOverrides(launch(dir, steps));
      expect(notes).toEqual([expect.stringMatching(/trainer.n_gpus_per_node is ignored/)]);
      return runSftJob(engine, config, () => {});
    };

    const straight = await run('straight', 6);
    expect(straight.steps).toBe(6);
    expect(straight.valAfter!['val/loss']).toBeLessThan(straight.valBefore!['val/loss']);
    const saved = await loadModel(engine, straight.checkpoint!);
    expect(saved.config.architecture).toBe('Qwen3ForCausalLM');
    expect(JSON.parse(await readFile(join(straight.checkpoint!, 'config.json'), 'utf8')).torch_dtype).toBe('float32');
    const metrics = (await readFile(join(root, 'straight', 'metrics.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(metrics.filter((m) => 'val/loss' in m.data).map((m) => m.step)).toEqual([0, 2, 4, 6]);

    const first = await run('resumed', 4);
    const rest = await run('resumed', 6);
    expect(rest.steps).toBe(6);
    expect([...losses(first), ...losses(rest)]).toEqual(losses(straight));
    expect(rest.valAfter).toEqual(straight.valAfter);
  });

  it(
    'trains LoRA adapters only, saves them as a PEFT adapter that scores as the trained model, and resumes ' + 'them',
    async () => {
      const engine = await gpuEngine();
      const { root, launch } = await tinySftRun();
      const lora = ['model.lora_rank=4', 'model.lora_alpha=8', 'optim.lr=1e-2'];
      const run = (dir: string, steps: number) =>
        runSftJob(engine, parseSftOverrides(launch(dir, steps, lora)).config, () => {});

      const straight = await run('lora', 3);
      expect(straight.valAfter!['val/loss']).toBeLessThan(straight.valBefore!['val/loss']);
      // The checkpoint's model is the base, unchanged; the adapter (B starts at zero in PEFT) has moved.
      const base = await loadModel(engine, join(root, 'model'));
      const saved = await loadModel(engine, straight.checkpoint!);
      expect(await readHfTensors(engine, saved.params, saved.config)).toEqual(
        await readHfTensors(engine, base.params, base.config),
      );
      const adapterDir = join(straight.checkpoint!, LORA_ADAPTER_DIR);
      const { settings, tensors } = await readLoraAdapter(adapterDir);
      expect(settings).toEqual({
        rank: 4,
        alpha: 8,
        useRslora: false,
        targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'],
      });
      const loraB = [...tensors].filter(([name]) => name.includes('lora_B'));
      expect(loraB.length).toBe(7 * saved.config.numLayers);
      for (const [, t] of loraB) expect(t.data.some((x) => x !== 0)).toBe(true);

      // The base with the saved adapter (loaded as PPO loads an actor's) gives the job's last validation loss.
      const config = parseSftOverrides(launch('lora', 3, lora)).config;
      const { tokenizer, template } = await modelTokenizer(join(root, 'model'));
      const examples = async (file: string) =>
        buildSftExamples(await readRlRecords(join(root, file)), { ...config.data, tokenizer, template: template! });
      const [train, val] = [await examples('sft-train.jsonl'), await examples('sft-val.jsonl')];
      const model = new CausalLm(engine, saved.config, saved.params);
      model.trunk.lora = await loadLoraAdapter(engine, adapterDir, saved.config, 'loaded');
      const T = Math.max(...[...train, ...val].map((e) => e.prompt.length + e.response.length));
      const scorer = new SftTrainer(
        engine,
        model,
        new AdamWOptimizer(engine, model.trunk.lora.params, adamwOf(config.optim)),
        { B: 4, T, padId: saved.config.padTokenId ?? tokenizer.special.pad?.id ?? tokenizer.special.eos!.id },
      );
      expect(await scorer.evaluate(val)).toBe(straight.valAfter!['val/loss']);

      // Resume restores the adapter and its AdamW state: the steps are the uninterrupted run's.
      const first = await run('lora-resumed', 2);
      const rest = await run('lora-resumed', 3);
      expect([...losses(first), ...losses(rest)]).toEqual(losses(straight));
      expect(rest.valAfter).toEqual(straight.valAfter);
      // A LoRA checkpoint is not resumed as full fine-tuning.
      await expect(runSftJob(engine, parseSftOverrides(launch('lora-resumed', 4)).config, () => {})).rejects.toThrow(
        /trained LoRA adapters \(lora_adapter\/\) but model.lora_rank=0/,
      );
    },
  );
});
