// Hugging Face directories through the GPU arenas: load → save → load is bit-identical for an actor and for a
// critic made from it, the critic is saved as *ForTokenClassification with score.weight and score.bias, a
// directory given as file contents (the browser demo's fetched checkpoint) loads as from disk, and
// tools/forward.js prints logits / values / rewards for the three heads.
import { it, expect } from 'vitest';
import { readFile, writeFile } from 'node:fs/promises';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { gpuEngine } from '../support/gpu-engine.ts';
import { describeWithFixtures, fixturePath } from '../support/fixtures.ts';
import { loadModel, saveModel } from '../../models/model-files-node.ts';
import { criticFromCausalLm } from '../../models/critic-init.ts';
import { withHead } from '../../models/hf-config.ts';
import { readHfTensors, createParameterArena, uploadHfTensors } from '../../models/parameter-store.ts';
import { modelFromFiles } from '../../models/model-files.ts';
import { parseSafetensors, serializeSafetensors } from '../../models/safetensors.ts';
import type { Arena, Engine } from '../../engine/index.ts';
import { makeTempDir } from '../support/temp-dir.ts';

async function arenaBytes(engine: Engine, arena: Arena): Promise<Uint8Array[]> {
  return Promise.all(arena.segments.map(async (s) => new Uint8Array((await engine.read(s)).buffer)));
}

describeWithFixtures('model directories', ['hf/llama-tiny'], () => {
  it('actor and critic survive save → load bit-identically', async () => {
    const engine = await gpuEngine();
    const root = await makeTempDir('model-files-');
    const actor = await loadModel(engine, fixturePath('hf/llama-tiny'));
    await saveModel(engine, join(root, 'actor'), actor.config, actor.params);
    const actorAgain = await loadModel(engine, join(root, 'actor'));
    expect(actorAgain.config).toEqual(actor.config);
    expect(await arenaBytes(engine, actorAgain.params)).toEqual(await arenaBytes(engine, actor.params));

    const critic = await criticFromCausalLm(engine, actor.config, actor.params, 3);
    await saveModel(engine, join(root, 'critic'), critic.config, critic.params);
    const saved = JSON.parse(await readFile(join(root, 'critic', 'config.json'), 'utf8'));
    expect(saved.architectures).toEqual(['LlamaForTokenClassification']);
    expect(Object.keys(saved.id2label)).toHaveLength(1);
    const criticAgain = await loadModel(engine, join(root, 'critic'));
    expect(criticAgain.config.head).toBe('token-classification');
    expect(await arenaBytes(engine, criticAgain.params)).toEqual(await arenaBytes(engine, critic.params));
    expect(criticAgain.params.has('score.bias')).toBe(true);
  });

  it(
    'file contents (a fetched directory) load bit-identically to the directory on disk; a missing tensor is ' + 'named',
    async () => {
      const engine = await gpuEngine();
      const dir = fixturePath('hf/llama-tiny');
      const config = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'));
      const safetensors = new Uint8Array(await readFile(join(dir, 'model.safetensors')));
      const fromDisk = await loadModel(engine, dir);
      const fromFiles = modelFromFiles(engine, { config, safetensors }, 'https://example.org/llama-tiny');
      expect(fromFiles.config).toEqual(fromDisk.config);
      expect(await arenaBytes(engine, fromFiles.params)).toEqual(await arenaBytes(engine, fromDisk.params));

      const { header, tensors } = parseSafetensors(safetensors);
      const kept = header.tensors
        .filter((t) => t.name !== 'model.norm.weight')
        .map((t) => ({ name: t.name, shape: t.shape, data: tensors.get(t.name)! }));
      expect(() =>
        modelFromFiles(engine, { config, safetensors: serializeSafetensors(kept) }, 'https://example.org/llama-tiny'),
      ).toThrow(/https:\/\/example.org\/llama-tiny\/model.safetensors: missing tensor model.norm.weight/);
    },
  );

  it('tools/forward.js prints logits, values and rewards', async () => {
    const engine = await gpuEngine();
    const root = await makeTempDir('forward-');
    const actor = await loadModel(engine, fixturePath('hf/llama-tiny'));
    const critic = await criticFromCausalLm(engine, actor.config, actor.params, 3);
    await saveModel(engine, join(root, 'critic'), critic.config, critic.params);
    // A reward model with the critic's trunk and score weight (the critic's fresh bias is zero), so its reward must
    // equal the critic's value at each row's last real token.
    const rewardConfig = { ...withHead(actor.config, 'sequence-classification'), padTokenId: 0 };
    const trunk = await readHfTensors(engine, critic.params, critic.config);
    const rewardParams = createParameterArena(engine, rewardConfig, 'reward');
    uploadHfTensors(engine, rewardParams, rewardConfig, (name) => trunk.get(name), 'reward');
    await saveModel(engine, join(root, 'reward'), rewardConfig, rewardParams);

    const input = join(root, 'input.json');
    await writeFile(
      input,
      JSON.stringify({
        input_ids: [
          [1, 4, 186, 246],
          [0, 0, 56, 123],
        ],
        attention_mask: [
          [1, 1, 1, 1],
          [0, 0, 1, 1],
        ],
      }),
    );
    const run = (model: string) =>
      JSON.parse(
        execFileSync('node', ['tools/forward.js', '--model', model, '--input', input], {
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'ignore'],
        }),
      );
    const logits = run(fixturePath('hf/llama-tiny')).logits;
    expect([logits.length, logits[0].length, logits[0][0].length]).toEqual([2, 4, 256]);
    const values = run(join(root, 'critic')).values;
    expect([values.length, values[0].length]).toEqual([2, 4]);
    const rewards = run(join(root, 'reward')).rewards;
    expect(rewards).toHaveLength(2);
    expect(rewards[0]).toBeCloseTo(values[0][3], 6);
    expect(rewards[1]).toBeCloseTo(values[1][3], 6);
  });
});
