// A Hugging Face model directory from its files' contents, for a caller that fetches them (the browser demo's
// shipped checkpoint); Node reads directories from disk with model-files-node.ts. The same parsers and checks:
// config.json through parseHfConfig, a single model.safetensors (any float dtype, decoded to F32), every tensor
// the config implies present with its shape (uploadHfTensors), tensors it does not use ignored as transformers does.
import type { Arena, Engine } from '../engine/index.ts';
import { parseHfConfig, type DecoderConfig } from './hf-config.ts';
import { createParameterArena, uploadHfTensors } from './parameter-store.ts';
import { parseSafetensors, SINGLE_FILE } from './safetensors.ts';

export interface ModelFileContents {
  /** config.json, parsed. */
  config: unknown;
  /** model.safetensors (sharded checkpoints are for Node). */
  safetensors: Uint8Array;
}

/** `source` names the directory (a URL, a path) in every error. */
export function modelFromFiles(
  engine: Engine,
  files: ModelFileContents,
  source: string,
  label = 'actor',
): { config: DecoderConfig; params: Arena } {
  const config = parseHfConfig(files.config, `${source}/config.json`);
  const file = `${source}/${SINGLE_FILE}`;
  const { header, tensors } = parseSafetensors(files.safetensors, file);
  const shapes = new Map(header.tensors.map((t) => [t.name, t.shape]));
  const params = createParameterArena(engine, config, label);
  uploadHfTensors(
    engine,
    params,
    config,
    (name) => {
      const data = tensors.get(name);
      if (data === undefined) return undefined;
      if (!(data instanceof Float32Array)) throw new Error(`${file}: tensor ${name} holds integers, expected floats`);
      return { shape: shapes.get(name)!, data };
    },
    file,
  );
  return { config, params };
}
