// Moves parameters between Hugging Face tensors (by HF name) and the engine's arena (fused tensors).
import { Arena, elementCount, type Engine, type FloatDType } from '../engine/index.ts';
import {
  NF4_BLOCK,
  NF4_NESTED_BLOCK,
  compressNf4Statistics,
  dequantizeNf4,
  nf4BlockScales,
  quantizeNf4,
} from '../engine/nf4.ts';
import { dequantizeInt8Rows, quantizeInt8Rows } from '../engine/int8.ts';
import type { DecoderConfig } from './hf-config.ts';
import { INT8_SCB, NF4_ABSMAX, hfSlices, parameterEntries, type WeightStorage } from './parameter-layout.ts';
import { toHalf } from '../kernels/util/to-half.ts';

export interface NamedTensor {
  shape: readonly number[];
  data: Float32Array;
}

/** The parameters of `config`; `storage` bf16/f16 stores frozen matrices in half precision, nf4/nf4-nested/int8
 *  a frozen LoRA base's layer projections quantized (see parameterEntries): read by forwards, and by a LoRA
 *  base's backward dX = dY·W, never given a gradient. */
export function createParameterArena(
  engine: Engine,
  config: DecoderConfig,
  label: string,
  storage: WeightStorage = 'f32',
): Arena {
  if (storage === 'nf4' || storage === 'nf4-nested') checkNf4Blocks(config, label, storage);
  return new Arena(engine, label, Arena.plan(engine, parameterEntries(config, storage)));
}

/** A fused tensor (q/k/v, gate/up) quantizes as bitsandbytes quantizes each of its HF tensors only when every part
 *  is whole blocks (and, double-quantized, every part but the last whole 256-blocks of blocks): true of every
 *  released shape (hidden sizes are multiples of 128), refused otherwise. */
function checkNf4Blocks(config: DecoderConfig, label: string, storage: 'nf4' | 'nf4-nested'): void {
  const slices = hfSlices(config).filter((s) => s.shape.length === 2 && s.tensor.endsWith('_proj.weight'));
  for (const [i, slice] of slices.entries()) {
    const count = elementCount(slice.shape);
    const lastPart = i === slices.length - 1 || slices[i + 1].tensor !== slice.tensor;
    const block = storage === 'nf4-nested' && !lastPart ? NF4_BLOCK * NF4_NESTED_BLOCK : NF4_BLOCK;
    if (count % block !== 0) {
      throw new Error(
        `${label}: load_in_4bit${storage === 'nf4-nested' ? ' with use_bnb_nested_quant' : ''}: ${slice.hfName} ` +
          `[${slice.shape.join(', ')}] has ${count} elements, not a multiple of ${block}; its blocks would straddle ` +
          `the fused ${slice.tensor}`,
      );
    }
  }
}

/** The NF4 blocks of each HF tensor fused in the arena tensor `name` (one part for an unfused one). */
function nf4Parts(config: DecoderConfig, name: string): number[] {
  return hfSlices(config)
    .filter((slice) => slice.tensor === name)
    .map((slice) => Math.ceil(elementCount(slice.shape) / NF4_BLOCK));
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
  uploadArenaTensors(engine, arena, fused, config);
}

/** Whether `name` is the scales of a quantized weight (uploaded and read with the weight). */
function isScalesOf(arena: Arena, name: string): boolean {
  const suffix = [NF4_ABSMAX, INT8_SCB].find((s) => name.endsWith(s));
  return suffix !== undefined && arena.dtypeOf(name.slice(0, -suffix.length)) === 'u32';
}

/** Fills the arena from tensors named as the arena names them (fused q/k/v, gate/up); a quantized weight is
 *  quantized here, on the host, into its codes and scales — which needs `config` (its shape and fused parts). */
export function uploadArenaTensors(
  engine: Engine,
  arena: Arena,
  values: ReadonlyMap<string, Float32Array>,
  config?: DecoderConfig,
): void {
  const shapes = config ? new Map(parameterEntries(config).map((e) => [e.name, e.shape])) : null;
  for (const name of arena.names()) {
    if (isScalesOf(arena, name)) continue;
    const data = values.get(name);
    if (!data) throw new Error(`parameters: no values for ${name}`);
    if (arena.dtypeOf(name) !== 'u32') {
      engine.upload(arena.get(name), data);
      continue;
    }
    if (!config || !shapes) throw new Error(`parameters: quantizing ${name} needs the model's config`);
    if (arena.has(`${name}${INT8_SCB}`)) {
      const [rows, cols] = shapes.get(name)!;
      const { codes, scb } = quantizeInt8Rows(data, rows, cols);
      engine.upload(arena.words(name), codes);
      engine.upload(arena.get(`${name}${INT8_SCB}`), scb);
      continue;
    }
    const { codes, absmax } = quantizeNf4(data);
    engine.upload(arena.words(name), codes);
    const scales = `${name}${NF4_ABSMAX}`;
    if (arena.dtypeOf(scales) === 'u32')
      engine.upload(arena.words(scales), compressNf4Statistics(absmax, nf4Parts(config, name)));
    else engine.upload(arena.get(scales), absmax);
  }
}

/** The float32 values of the arena's tensor `name` (shape `shape`): a quantized weight dequantized. */
async function readValues(engine: Engine, arena: Arena, name: string, shape: readonly number[]): Promise<Float32Array> {
  if (arena.dtypeOf(name) !== 'u32') return engine.read(arena.get(name));
  const codes = await engine.read(arena.words(name));
  if (arena.has(`${name}${INT8_SCB}`))
    return dequantizeInt8Rows(codes, await engine.read(arena.get(`${name}${INT8_SCB}`)), shape[0], shape[1]);
  const scales = `${name}${NF4_ABSMAX}`;
  const count = elementCount(shape);
  const absmax =
    arena.dtypeOf(scales) === 'u32'
      ? nf4BlockScales(await engine.read(arena.words(scales)), Math.ceil(count / NF4_BLOCK))
      : await engine.read(arena.get(scales));
  return dequantizeNf4(codes, absmax, count);
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

/** A copy of `params` stored as `storage`, labelled `label` (a quantized reference of the initial actor). Goes
 *  through the host, as a checkpoint load does: NF4 and int8 are quantized there. */
export async function storedParameterCopy(
  engine: Engine,
  config: DecoderConfig,
  params: Arena,
  label: string,
  storage: WeightStorage,
): Promise<Arena> {
  const values = await readHfTensors(engine, params, config);
  const stored = createParameterArena(engine, config, label, storage);
  uploadHfTensors(engine, stored, config, (name) => values.get(name), label);
  return stored;
}

/** `params` stored anew as `storage` (the built-in model's float32 weights as a LoRA base); the old arena is freed. */
export async function restoredParameters(
  engine: Engine,
  config: DecoderConfig,
  params: Arena,
  storage: WeightStorage,
): Promise<Arena> {
  if (storage === 'f32') return params;
  const stored = await storedParameterCopy(engine, config, params, params.label, storage);
  for (const buffer of params.buffers) engine.destroyTensor(buffer);
  return stored;
}
