// Hugging Face model directories ⇄ parameter arenas on the GPU (Node). Every tensor read is checked finite: a NaN in a
// part the loss never touches (an unused embedding row) would otherwise train unnoticed and fail the final save. A
// critic opened from a causal-LM checkpoint (`as: 'token-classification'`) keeps the trunk and gets a fresh `score`
// head (as transformers initialises it, see critic-init.ts); the causal LM's lm_head is then not loaded.
import type { Arena, Engine } from '../engine/index.ts';
import { CheckpointError, openHfCheckpoint, saveHfCheckpoint, type HfCheckpoint } from './checkpoint-io-node.ts';
import { networkDifferences, type DecoderConfig, type TorchDtype } from './hf-config.ts';
import type { SafetensorsDtype } from './safetensors.ts';
import { createParameterArena, uploadHfTensors, readHfTensors, type NamedTensor } from './parameter-store.ts';
import { hfSlices, type WeightStorage } from './parameter-layout.ts';
import { freshScoreTensor } from './critic-init.ts';
import { describeNonFinite, firstNonFinite } from './non-finite.ts';

export interface LoadedModel {
  checkpoint: HfCheckpoint;
  config: DecoderConfig;
  params: Arena;
}

export interface LoadModelOptions {
  as?: DecoderConfig['head'];
  label?: string;
  seed?: number;
  /** A frozen model's storage given its checkpoint's dtype (see createParameterArena); float32 by default. */
  weightDtype?: (checkpointDtype: TorchDtype) => WeightStorage;
}

/** Every tensor of an open checkpoint on the host, each checked finite; a missing score head made fresh. */
async function readCheckedTensors(
  checkpoint: HfCheckpoint,
  options: LoadModelOptions,
): Promise<Map<string, NamedTensor>> {
  const { config, tensors } = checkpoint;
  const values = new Map<string, NamedTensor>();
  for (const slice of hfSlices(config)) {
    const info = tensors.info(slice.hfName);
    if (info) {
      const data = Float32Array.from(await tensors.read(slice.hfName));
      const bad = firstNonFinite(data);
      if (bad >= 0) {
        throw new CheckpointError(
          `${tensors.fileOf(slice.hfName)}: ${describeNonFinite(slice.hfName, data, bad, info.shape)}; ` +
            `refusing to load the ${options.label ?? config.head} with non-finite weights (they would spread to ` +
            `every value they touch, and no checkpoint of the run could be saved)`,
        );
      }
      values.set(slice.hfName, { shape: info.shape, data });
    } else {
      const fresh = freshScoreTensor(slice.hfName, slice.shape, options.seed ?? 0);
      if (fresh) values.set(slice.hfName, fresh);
    }
  }
  return values;
}

export async function loadModel(engine: Engine, dir: string, options: LoadModelOptions = {}): Promise<LoadedModel> {
  const checkpoint = await openHfCheckpoint(dir, { as: options.as });
  const { config, tensors } = checkpoint;
  try {
    const values = await readCheckedTensors(checkpoint, options);
    const params = createParameterArena(
      engine,
      config,
      options.label ?? config.head,
      options.weightDtype?.(config.torchDtype) ?? 'f32',
    );
    uploadHfTensors(engine, params, config, (name) => values.get(name), dir);
    return { checkpoint, config, params };
  } finally {
    await tensors.close();
  }
}

/**
 * Loads another checkpoint of the same network into `params` (a server's weight update): the directory is
 * opened, compared with `config` and every tensor read and checked before anything is written, so a directory
 * that is not a matching checkpoint (another architecture or shape, missing files or tensors, non-finite
 * weights) throws and leaves `params` as they were.
 */
export async function reloadModel(
  engine: Engine,
  dir: string,
  config: DecoderConfig,
  params: Arena,
  label = 'model',
): Promise<HfCheckpoint> {
  const checkpoint = await openHfCheckpoint(dir);
  try {
    const differences = networkDifferences(config, checkpoint.config);
    if (differences.length > 0)
      throw new CheckpointError(`${dir} holds another network than the one served (${differences.join(', ')})`);
    const values = await readCheckedTensors(checkpoint, { label });
    uploadHfTensors(engine, params, config, (name) => values.get(name), dir);
    return checkpoint;
  } finally {
    await checkpoint.tensors.close();
  }
}

const SAFETENSORS_DTYPE: Readonly<Record<TorchDtype, SafetensorsDtype>> = {
  float32: 'F32',
  bfloat16: 'BF16',
  float16: 'F16',
};

export interface SaveModelOptions {
  tokenizerFrom?: string;
  generationConfig?: Record<string, unknown>;
  /** Stored dtype of the weights (and config.json's torch_dtype); by default the dtype the model came in
   *  (config.torchDtype), so a bf16 checkpoint comes back bf16, half the size of float32. */
  dtype?: TorchDtype;
}

/**
 * Saves the arena as a complete HF directory (atomically: temp directory, then rename). Weights holding NaN or
 * Inf are refused, naming the tensor: such a checkpoint would poison every run that loads or resumes from it.
 */
export async function saveModel(
  engine: Engine,
  dir: string,
  config: DecoderConfig,
  params: Arena,
  options: SaveModelOptions = {},
): Promise<void> {
  await saveHfTensors(dir, config, await readHfTensors(engine, params, config), options);
}

/** saveModel for HF-named tensors already on the host (a merged LoRA model). */
export async function saveHfTensors(
  dir: string,
  config: DecoderConfig,
  tensors: ReadonlyMap<string, NamedTensor>,
  options: SaveModelOptions = {},
): Promise<void> {
  for (const [name, { shape, data }] of tensors) {
    const at = firstNonFinite(data);
    if (at >= 0)
      throw new CheckpointError(
        `saving ${dir}: ${describeNonFinite(name, data, at, shape)}; refusing to write non-finite weights`,
      );
  }
  const torchDtype = options.dtype ?? config.torchDtype;
  await saveHfCheckpoint(dir, {
    config: { ...config, torchDtype },
    tensors: [...tensors].map(([name, t]) => ({
      name,
      shape: t.shape,
      dtype: SAFETENSORS_DTYPE[torchDtype],
      data: t.data,
    })),
    tokenizerFrom: options.tokenizerFrom,
    generationConfig: options.generationConfig,
  });
}
