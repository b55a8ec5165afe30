// A tiny real run for trainer tests: a fresh 1-layer Qwen3-style model saved as a Hugging Face directory with the
// arithmetic task's tokenizer, and a JSONL training file in verl's schema.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine } from '../../engine/index.ts';
import { tinyQwen3Config } from '../../models/presets.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { initialParameters } from '../../models/init.ts';
import { saveModel } from '../../models/model-files-node.ts';
import { arithmeticTokenizer, arithmeticTokenizerFiles, arithmeticDataset } from '../../ppo/tasks/arithmetic.ts';

export interface TinyRun {
  root: string;
  /** Overrides that point a run at the tiny model and data, with small batches and file-only logging. */
  overrides: string[];
}

export async function makeTinyRun(trainSize = 6): Promise<TinyRun> {
  const root = await mkdtemp(join(tmpdir(), 'tiny-run-'));
  const engine = await Engine.create();
  const model = join(root, 'model');
  try {
    const config = tinyQwen3Config(arithmeticTokenizer.vocabSize, { layers: 1, hidden: 32, heads: 2, kvHeads: 1, headDim: 16, intermediate: 64 });
    const params = createParameterArena(engine, config, 'actor');
    uploadArenaTensors(engine, params, initialParameters(config, 5));
    await saveModel(engine, model, config, params);
  } finally {
    engine.destroy();
  }
  const { tokenizerJson, tokenizerConfig } = arithmeticTokenizerFiles();
  await writeFile(join(model, 'tokenizer.json'), JSON.stringify(tokenizerJson));
  await writeFile(join(model, 'tokenizer_config.json'), JSON.stringify(tokenizerConfig));
  const { train } = arithmeticDataset({ digits: 1, trainSize, valSize: 0, seed: 3 });
  const data = join(root, 'train.jsonl');
  await writeFile(data, train.map((r) => JSON.stringify(r.row)).join('\n') + '\n');
  return {
    root,
    overrides: [
      `actor_rollout_ref.model.path=${model}`, `data.train_files=${data}`, 'data.train_batch_size=4', 'data.max_prompt_length=16',
      'data.max_response_length=3', 'actor_rollout_ref.actor.ppo_mini_batch_size=2', 'actor_rollout_ref.actor.optim.lr=1e-2',
      'critic.optim.lr=1e-2', 'trainer.val_before_train=false', 'trainer.test_freq=-1', 'trainer.logger=[file]',
    ],
  };
}
