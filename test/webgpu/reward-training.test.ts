// Reward-model training end to end at a tiny size: a Qwen3 causal LM saved as transformers would, opened as a
// *ForSequenceClassification with a fresh bias-free score (TRL's AutoModelForSequenceClassification from the SFT
// model), trained on preference pairs with gradient accumulation until held-out pairs are ranked right, then saved
// in HF's layout and loaded back as this engine's reward model and as a critic, both scoring as the trained model.
import { describe, it, expect } from 'vitest';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gpuEngine } from '../support/gpu-engine.ts';
import { seededRandom } from '../support/arrays.ts';
import { loadModel, saveModel } from '../../models/model-files-node.ts';
import { tinyQwen3Config } from '../../models/presets.ts';
import { initialParameters } from '../../models/init.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { ValueModel } from '../../models/value-model.ts';
import { uploadTokenBatch } from '../../models/token-batch.ts';
import { SafetensorsFile } from '../../models/safetensors-node.ts';
import { AdamWOptimizer } from '../../ppo/training/adamw-optimizer.ts';
import { RewardModelTrainer, buildPairBatch } from '../../ppo/reward-model/reward-trainer.ts';
import type { PreferencePair } from '../../ppo/reward-model/preference-pairs.ts';
import { makeTempDir } from '../support/temp-dir.ts';

const EOS = 2;

/** Prompts of 2 to 5 random tokens; the chosen answer ends in token 5, the rejected one in token 6. */
function pairs(count: number, seed: number): PreferencePair[] {
  const random = seededRandom(seed);
  return Array.from({ length: count }, (_, i) => {
    const prompt = Array.from({ length: 2 + Math.floor(random() * 4) }, () => 7 + Math.floor(random() * 20));
    return {
      where: `pair ${i}`,
      chosen: [...prompt, 5, EOS],
      rejected: [...prompt, 6, EOS],
      margin: i % 2 === 0 ? 0 : 0.5,
    };
  });
}

describe('reward-model training', () => {
  it(
    'learns held-out preferences; its save is HF *ForSequenceClassification that loads as reward model and ' + 'critic',
    async () => {
      const engine = await gpuEngine();
      const root = await makeTempDir('reward-training-');
      const lmConfig = tinyQwen3Config(32, {
        layers: 1,
        hidden: 32,
        heads: 2,
        kvHeads: 1,
        headDim: 16,
        intermediate: 64,
      });
      const lmParams = createParameterArena(engine, lmConfig, 'sft');
      uploadArenaTensors(engine, lmParams, initialParameters(lmConfig, 5));
      await saveModel(engine, join(root, 'sft'), lmConfig, lmParams);

      const opened = await loadModel(engine, join(root, 'sft'), { as: 'sequence-classification', seed: 1 });
      const model = new ValueModel(engine, opened.config, opened.params);
      const optimizer = new AdamWOptimizer(engine, opened.params, {
        lr: 0,
        betas: [0.9, 0.999],
        eps: 1e-8,
        weightDecay: 0,
        maxGradNorm: 1,
      });
      const P = 4;
      const T = 8;
      const trainer = new RewardModelTrainer(engine, model, optimizer, { P, T });
      const train = pairs(64, 1);
      const heldOut = pairs(16, 2);
      const before = await trainer.evaluate(heldOut);
      const losses: number[] = [];
      for (let step = 0; step < 24; step++) {
        // Train batch of 8 pairs = two micro-batches of P accumulated into one step.
        const result = await trainer.trainStep(train.slice((step * 8) % 64, ((step * 8) % 64) + 8), 1e-2);
        losses.push(result.loss);
        expect(Number.isFinite(result.gradNorm)).toBe(true);
      }
      const after = await trainer.evaluate(heldOut);
      expect(after.loss).toBeLessThan(before.loss / 4);
      expect(after.accuracy).toBe(1);
      expect(after.margin).toBeGreaterThan(1);
      expect(losses[losses.length - 1]).toBeLessThan(losses[0]);

      const rmDir = join(root, 'rm');
      await saveModel(engine, rmDir, model.config, opened.params);
      const saved = JSON.parse(await readFile(join(rmDir, 'config.json'), 'utf8'));
      expect(saved.architectures).toEqual(['Qwen3ForSequenceClassification']);
      expect(Object.keys(saved.id2label)).toEqual(['0']);
      expect(saved.pad_token_id).toBe(0);
      // HF's Qwen3ForSequenceClassification: score = nn.Linear(hidden_size, num_labels, bias=False); no lm_head.
      const file = await SafetensorsFile.open(join(rmDir, 'model.safetensors'));
      try {
        const names = file.header.tensors.map((t) => t.name);
        expect(file.header.tensors.find((t) => t.name === 'score.weight')?.shape).toEqual([1, 32]);
        expect(names.filter((n) => !n.startsWith('model.'))).toEqual(['score.weight']);
      } finally {
        await file.close();
      }

      // The saved model's scores are the trained model's: as reward_model.model.path and as critic.model.path.
      const probe = heldOut.slice(0, P);
      const batch = buildPairBatch(probe, T, 0);
      const trained = await model.sequenceScores(
        uploadTokenBatch(engine, batch.host, 32, 'probe'),
        batch.host.attentionMask,
      );
      const reward = await loadModel(engine, rmDir, { label: 'reward_model' });
      expect(reward.config.head).toBe('sequence-classification');
      const rewardScores = await new ValueModel(engine, reward.config, reward.params).sequenceScores(
        uploadTokenBatch(engine, batch.host, 32, 'probe-rm'),
        batch.host.attentionMask,
      );
      expect(rewardScores).toEqual(trained);
      const critic = await loadModel(engine, rmDir, { as: 'token-classification', label: 'critic' });
      const criticValues = await engine.read(
        new ValueModel(engine, critic.config, critic.params).tokenValues(
          uploadTokenBatch(engine, batch.host, 32, 'probe-critic'),
          { saveForBackward: false },
        ),
      );
      batch.last.forEach((t, b) => expect(criticValues[b * T + t]).toBeCloseTo(trained[b], 5));
    },
  );
});
