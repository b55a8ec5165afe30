// LoRA adapters on disk as PEFT keeps them (Node): a directory with adapter_config.json and
// adapter_model.safetensors (PeftModel.save_pretrained's files; PeftModel.from_pretrained loads it on the base
// model), and the merged model (W + scaling·B·A) as a plain Hugging Face directory.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Arena, Engine } from '../engine/index.ts';
import type { DecoderConfig } from './hf-config.ts';
import { LoraAdapters } from './lora-adapters.ts';
import {
  loraValuesFromPeft,
  mergeLora,
  parsePeftAdapterConfig,
  peftAdapterConfig,
  peftTensors,
  type LoraSettings,
} from './lora.ts';
import { readHfTensors, type NamedTensor } from './parameter-store.ts';
import { parseSafetensors, serializeSafetensors } from './safetensors.ts';
import { saveHfTensors, type SaveModelOptions } from './model-files-node.ts';
import { CheckpointError } from './checkpoint-io-node.ts';
import { describeNonFinite, firstNonFinite } from './non-finite.ts';

export const ADAPTER_CONFIG_FILE = 'adapter_config.json';
export const ADAPTER_WEIGHTS_FILE = 'adapter_model.safetensors';

/** The PEFT adapter's directory inside a checkpoint (verl's name): PPO's actor/ and the SFT job's global_step_N/. */
export const LORA_ADAPTER_DIR = 'lora_adapter';

/** Writes the adapters as a PEFT adapter directory; `baseModel` is recorded as base_model_name_or_path. */
export async function saveLoraAdapter(dir: string, adapters: LoraAdapters, baseModel: string | null): Promise<void> {
  const tensors = peftTensors(adapters.config, adapters.settings, await adapters.read());
  await mkdir(dir, { recursive: true });
  await writeFile(
    join(dir, ADAPTER_CONFIG_FILE),
    `${JSON.stringify(peftAdapterConfig(adapters.settings, baseModel), null, 2)}\n`,
  );
  await writeFile(
    join(dir, ADAPTER_WEIGHTS_FILE),
    serializeSafetensors([...tensors].map(([name, t]) => ({ name, shape: t.shape, data: t.data }))),
  );
}

/** A PEFT adapter directory's settings and tensors (by PEFT name). Problems are CheckpointErrors naming the file. */
export async function readLoraAdapter(
  dir: string,
): Promise<{ settings: LoraSettings; tensors: Map<string, NamedTensor> }> {
  const configFile = join(dir, ADAPTER_CONFIG_FILE);
  let settings: LoraSettings;
  try {
    settings = parsePeftAdapterConfig(JSON.parse(await readFile(configFile, 'utf8')), configFile);
  } catch (err) {
    const message = (err as Error).message;
    throw new CheckpointError(
      message.startsWith(configFile) ? message : `${configFile}: cannot read a PEFT adapter config (${message})`,
    );
  }
  const weightsFile = join(dir, ADAPTER_WEIGHTS_FILE);
  const { header, tensors } = parseSafetensors(new Uint8Array(await readFile(weightsFile)), weightsFile);
  const named = new Map<string, NamedTensor>();
  for (const info of header.tensors) {
    const data = Float32Array.from(tensors.get(info.name)!);
    const bad = firstNonFinite(data);
    if (bad >= 0)
      throw new CheckpointError(
        `${weightsFile}: ${describeNonFinite(info.name, data, bad, info.shape)}; refusing to load a LoRA adapter ` +
          `with non-finite weights`,
      );
    named.set(info.name, { shape: info.shape, data });
  }
  return { settings, tensors: named };
}

/** Loads a PEFT adapter directory onto a base model of `config`. */
export async function loadLoraAdapter(
  engine: Engine,
  dir: string,
  config: DecoderConfig,
  label: string,
): Promise<LoraAdapters> {
  const { settings, tensors } = await readLoraAdapter(dir);
  let values: Map<string, Float32Array>;
  try {
    values = loraValuesFromPeft(config, settings, (name) => tensors.get(name), join(dir, ADAPTER_WEIGHTS_FILE));
  } catch (err) {
    throw new CheckpointError((err as Error).message);
  }
  return new LoraAdapters(engine, config, settings, values, label);
}

/** Saves base + adapters merged (W + scaling·B·A) as a complete HF directory. */
export async function saveMergedModel(
  engine: Engine,
  dir: string,
  params: Arena,
  adapters: LoraAdapters,
  options: SaveModelOptions = {},
): Promise<void> {
  const c = adapters.config;
  const merged = mergeLora(
    c,
    adapters.settings,
    await readHfTensors(engine, params, c),
    peftTensors(c, adapters.settings, await adapters.read()),
  );
  await saveHfTensors(dir, c, merged, options);
}
