// LoRA adapters on disk as PEFT keeps them (Node): a directory with adapter_config.json and
// adapter_model.safetensors (PeftModel.save_pretrained's files; PeftModel.from_pretrained loads it on the base
// model), and the merged model (W + scaling·B·A) as a plain Hugging Face directory.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Arena, ArenaEntry, Engine } from '../engine/index.ts';
import type { DecoderConfig } from './hf-config.ts';
import { LoraAdapters } from './lora-adapters.ts';
import {
  loraValuesFromPeft,
  mergeLora,
  parsePeftAdapterConfig,
  peftAdapterConfig,
  peftTensors,
  PEFT_PREFIX,
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
  const values = await adapters.read();
  const tensors = peftTensors(adapters.config, adapters.settings, values);
  // modules_to_save under PEFT's saved names (get_peft_model_state_dict drops ".modules_to_save.default").
  for (const { name, shape } of adapters.modulesToSave)
    tensors.set(`${PEFT_PREFIX}${name}`, { shape, data: values.get(name)! });
  await mkdir(dir, { recursive: true });
  const modules = [...new Set(adapters.modulesToSave.map((e) => moduleOf(e.name)))];
  await writeFile(
    join(dir, ADAPTER_CONFIG_FILE),
    `${JSON.stringify(peftAdapterConfig(adapters.settings, baseModel, modules), null, 2)}\n`,
  );
  await writeFile(
    join(dir, ADAPTER_WEIGHTS_FILE),
    serializeSafetensors([...tensors].map(([name, t]) => ({ name, shape: t.shape, data: t.data }))),
  );
}

/** A PEFT adapter directory's settings and tensors (by PEFT name). Problems are CheckpointErrors naming the file. */
export async function readLoraAdapter(
  dir: string,
  allowedModulesToSave: readonly string[] = [],
): Promise<{ settings: LoraSettings; tensors: Map<string, NamedTensor> }> {
  const configFile = join(dir, ADAPTER_CONFIG_FILE);
  let settings: LoraSettings;
  try {
    settings = parsePeftAdapterConfig(JSON.parse(await readFile(configFile, 'utf8')), configFile, allowedModulesToSave);
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

/** Loads a PEFT adapter directory onto a base model of `config`; `modulesToSave` (a critic's score) must be in it. */
export async function loadLoraAdapter(
  engine: Engine,
  dir: string,
  config: DecoderConfig,
  label: string,
  modulesToSave: readonly ArenaEntry[] = [],
): Promise<LoraAdapters> {
  const { settings, tensors } = await readLoraAdapter(dir, [...new Set(modulesToSave.map((e) => moduleOf(e.name)))]);
  const weightsFile = join(dir, ADAPTER_WEIGHTS_FILE);
  let values: Map<string, Float32Array>;
  try {
    values = loraValuesFromPeft(config, settings, (name) => tensors.get(name), weightsFile);
  } catch (err) {
    throw new CheckpointError((err as Error).message);
  }
  for (const { name, shape } of modulesToSave) {
    const t = tensors.get(`${PEFT_PREFIX}${name}`);
    if (!t || t.shape.join() !== shape.join())
      throw new CheckpointError(
        `${weightsFile}: ${PEFT_PREFIX}${name} is ${t ? `shape [${t.shape.join(', ')}]` : 'missing'}, expected ` +
          `shape [${shape.join(', ')}] (modules_to_save)`,
      );
    values.set(name, t.data);
  }
  return new LoraAdapters(engine, config, settings, values, label, modulesToSave);
}

/** The module a tensor belongs to: "score.weight" → "score". */
function moduleOf(name: string): string {
  return name.slice(0, name.lastIndexOf('.'));
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
