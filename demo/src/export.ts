// Trained models as Hugging Face directories — config.json, model.safetensors, generation_config.json for the
// causal LM, the tokenizer files — zipped in the tab so the page can offer them as one download.
import { zipSync } from 'fflate';
import type { Arena, Engine } from '../../engine/index.ts';
import type { DecoderConfig } from '../../models/hf-config.ts';
import { toHfConfig } from '../../models/hf-config.ts';
import { readHfTensors } from '../../models/parameter-store.ts';
import { serializeSafetensors, SINGLE_FILE } from '../../models/safetensors.ts';

export interface ModelToExport {
  /** Directory name inside the zip: actor, critic. */
  dir: string;
  weights: { config: DecoderConfig; params: Arena };
}

const json = (value: unknown) => new TextEncoder().encode(`${JSON.stringify(value, null, 2)}\n`);

async function hfDirectoryFiles(
  engine: Engine,
  { config, params }: ModelToExport['weights'],
  tokenizerFiles: Record<string, string>,
): Promise<Record<string, Uint8Array>> {
  const tensors = await readHfTensors(engine, params, config);
  const files: Record<string, Uint8Array> = {
    'config.json': json(toHfConfig(config)),
    [SINGLE_FILE]: serializeSafetensors([...tensors].map(([name, t]) => ({ name, shape: t.shape, data: t.data }))),
  };
  if (config.head === 'causal-lm') {
    files['generation_config.json'] = json({
      bos_token_id: config.bosTokenId,
      eos_token_id: config.eosTokenIds.length === 1 ? config.eosTokenIds[0] : config.eosTokenIds,
      pad_token_id: config.padTokenId,
    });
  }
  for (const [name, text] of Object.entries(tokenizerFiles)) files[name] = new TextEncoder().encode(text);
  return files;
}

/** A zip holding `root/<dir>/…` for each model. */
export async function modelsZip(
  engine: Engine,
  root: string,
  models: readonly ModelToExport[],
  tokenizerFiles: Record<string, string>,
): Promise<Uint8Array> {
  const tree: Record<string, Record<string, Uint8Array>> = {};
  for (const model of models) tree[model.dir] = await hfDirectoryFiles(engine, model.weights, tokenizerFiles);
  // Safetensors of random-looking floats barely compress; level 1 keeps the zip quick to build.
  return zipSync({ [root]: tree }, { level: 1 });
}
