// Moves parameters between Hugging Face tensors (by HF name) and the engine's arena (fused tensors).
import { Arena, elementCount, type Engine, type FloatDType } from '../engine/index.ts';
import { NF4_BLOCK, dequantizeNf4, quantizeNf4 } from '../engine/nf4.ts';
import type { DecoderConfig } from './hf-config.ts';
import { NF4_ABSMAX, hfSlices, parameterEntries, type WeightStorage } from './parameter-layout.ts';
import { toHalf } from '../kernels/util/to-half.ts';

export interface NamedTensor {
  shape: readonly number[];
  data: Float32Array;
}

/** The parameters of `config`; `storage` bf16/f16 stores frozen matrices in half precision, nf4 a frozen LoRA
 *  base's layer projections in NF4 (see parameterEntries): read by forwards, and by a LoRA base's backward
 *  dX = dY·W, never given a gradient. */
export function createParameterArena(
  engine: Engine,
  config: DecoderConfig,
  label: string,
  storage: WeightStorage = 'f32',
): Arena {
  if (storage === 'nf4') checkNf4Blocks(config, label);
  return new Arena(engine, label, Arena.plan(engine, parameterEntries(config, storage)));
}

/** A fused tensor (q/k/v, gate/up) quantizes as bitsandbytes quantizes each of its HF tensors only when every part
 *  is whole blocks: true of every released shape (hidden sizes are multiples of 64), refused otherwise. */
function checkNf4Blocks(config: DecoderConfig, label: string): void {
  for (const slice of hfSlices(config)) {
    const count = elementCount(slice.shape);
    if (slice.shape.length === 2 && slice.tensor.endsWith('_proj.weight') && count % NF4_BLOCK !== 0) {
      throw new Error(
        `${label}: load_in_4bit: ${slice.hfName} [${slice.shape.join(', ')}] has ${count} elements, not a multiple ` +
          `of NF4's block of ${NF4_BLOCK}; its blocks would straddle the fused ${slice.tensor}`,
      );
    }
  }
}

/** Fills the arena from HF-named tensors; `lookup` returns undefined for a missing name (an error here). */
export function uploadHfTensors(
  engine: Engine,
  arena: Arena,
  config: DecoderConfig,
  lookup: (hfName: string) => NamedTensor | undefined,
  source: string,
): void {
  const fused = new Map<string, Float32Array>();
  for (const entry of parameterEntries(config)) fused.set(entry.name, new Float32Array(elementCount(entry.shape)));
  for (const slice of hfSlices(config)) {
    const tensor = lookup(slice.hfName);
    if (!tensor) throw new Error(`${source}: missing tensor ${slice.hfName} (shape [${slice.shape.join(', ')}])`);
    if (tensor.shape.length !== slice.shape.length || tensor.shape.some((d, i) => d !== slice.shape[i])) {
      throw new Error(
        `${source}: tensor ${slice.hfName} has shape [${tensor.shape.join(', ')}], expected ` +
          `[${slice.shape.join(', ')}]`,
      );
    }
    const rowSize = slice.shape.slice(1).reduce((a, b) => a * b, 1);
    fused.get(slice.tensor)!.set(tensor.data, slice.rowStart * rowSize);
  }
  uploadArenaTensors(engine, arena, fused);
}

/** Fills the arena from tensors named as the arena names them (fused q/k/v, gate/up); an NF4 weight is quantized
 *  here, on the host, into its codes and block scales. */
export function uploadArenaTensors(engine: Engine, arena: Arena, values: ReadonlyMap<string, Float32Array>): void {
  for (const name of arena.names()) {
    if (name.endsWith(NF4_ABSMAX) && arena.dtypeOf(name.slice(0, -NF4_ABSMAX.length)) === 'u32') continue;
    const data = values.get(name);
    if (!data) throw new Error(`parameters: no values for ${name}`);
    if (arena.dtypeOf(name) !== 'u32') {
      engine.upload(arena.get(name), data);
      continue;
    }
    const { codes, absmax } = quantizeNf4(data);
    engine.upload(arena.words(name), codes);
    engine.upload(arena.get(`${name}${NF4_ABSMAX}`), absmax);
  }
}

/** The float32 values of the arena's tensor `name` (shape `shape`): an NF4 weight dequantized. */
async function readValues(engine: Engine, arena: Arena, name: string, shape: readonly number[]): Promise<Float32Array> {
  if (arena.dtypeOf(name) !== 'u32') return engine.read(arena.get(name));
  const [codes, absmax] = await Promise.all([
    engine.read(arena.words(name)),
    engine.read(arena.get(`${name}${NF4_ABSMAX}`)),
  ]);
  return dequantizeNf4(codes, absmax, elementCount(shape));
}

/** Reads the arena back as HF-named tensors (fused tensors split again). */
export async function readHfTensors(
  engine: Engine,
  arena: Arena,
  config: DecoderConfig,
): Promise<Map<string, NamedTensor>> {
  const fused = new Map<string, Float32Array>();
  for (const entry of parameterEntries(config))
    fused.set(entry.name, await readValues(engine, arena, entry.name, entry.shape));
  return splitHfTensors(config, fused);
}

/** Engine-named (fused) tensors as HF-named ones: q/k/v and gate/up split again. */
export function splitHfTensors(
  config: DecoderConfig,
  fused: ReadonlyMap<string, Float32Array>,
): Map<string, NamedTensor> {
  const out = new Map<string, NamedTensor>();
  for (const slice of hfSlices(config)) {
    const rowSize = slice.shape.slice(1).reduce((a, b) => a * b, 1);
    const start = slice.rowStart * rowSize;
    out.set(slice.hfName, {
      shape: slice.shape,
      data: fused.get(slice.tensor)!.slice(start, start + elementCount(slice.shape)),
    });
  }
  return out;
}

/** A frozen copy of `params` (the reference model from the actor) with its matrices in `weightDtype`: float32
 *  tensors are copied, half ones converted on the device (round to nearest even). */
export function frozenParameterCopy(
  engine: Engine,
  config: DecoderConfig,
  params: Arena,
  label: string,
  weightDtype: FloatDType,
): Arena {
  const copy = createParameterArena(engine, config, label, weightDtype);
  for (const name of copy.names()) copyParameter(engine, params, copy, name);
  return copy;
}

/** Records copying the tensor `name` of `params` into `copy` (made by frozenParameterCopy): float32 copied, half
 *  precision converted on the device (round to nearest even). */
export function copyParameter(engine: Engine, params: Arena, copy: Arena, name: string): void {
  const source = params.get(name);
  const target = copy.get(name);
  if (target.dtype === source.dtype) engine.copy(source, target);
  else toHalf(engine, { values: source, halves: target });
}

/** `params` stored anew as `storage` (the built-in model's float32 weights as a LoRA base); the old arena is freed.
 *  Goes through the host, as a checkpoint load does: NF4 is quantized there. */
export async function restoredParameters(
  engine: Engine,
  config: DecoderConfig,
  params: Arena,
  storage: WeightStorage,
): Promise<Arena> {
  if (storage === 'f32') return params;
  const values = await readHfTensors(engine, params, config);
  const stored = createParameterArena(engine, config, params.label, storage);
  uploadHfTensors(engine, stored, config, (name) => values.get(name), params.label);
  for (const buffer of params.buffers) engine.destroyTensor(buffer);
  return stored;
}
