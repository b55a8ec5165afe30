// AdamW state (step count and both moments of every parameter tensor, named as the arena names them) as
// safetensors bytes, so a checkpoint can resume training exactly — on this device or one whose binding limit
// packs the arena differently. Browser-safe: bytes in, bytes out.
// AdamW8bit's 8-bit tensors store bitsandbytes' state names instead of exp_avg/exp_avg_sq: `state1.<name>` and
// `state2.<name>` (the codes, I32 words of four uint8 codes each, element 4w+j in byte j: safetensors here reads no
// U8) and `absmax1.<name>`, `absmax2.<name>` (F32), so a reload is bit-identical.
import type { ArenaEntry } from '../../engine/index.ts';
import { elementCount } from '../../engine/index.ts';
import { type TensorToWrite, parseSafetensors, serializeSafetensors } from '../../models/safetensors.ts';
import { describeNonFinite, firstNonFinite } from '../../models/non-finite.ts';
import { adamw8bitSizes } from '../../kernels/optim/adamw8bit.ts';
import type { AdamWState, QuantizedMoments } from './adamw-optimizer.ts';

/** The file's bytes in one buffer (tests, the browser); optimizer-state-node.ts writes them without it. */
export function encodeOptimizerState(state: AdamWState): Uint8Array {
  return serializeSafetensors(optimizerStateTensors(state), optimizerStateMetadata(state));
}

export function optimizerStateMetadata(state: AdamWState): Record<string, string> {
  return { format: 'pt', step: String(state.step) };
}

/** The file's tensors, in order, viewing the state's arrays (no copy). */
export function optimizerStateTensors(state: AdamWState): TensorToWrite[] {
  const tensors: TensorToWrite[] = [...state.m].flatMap(([name, m]) => [
    { name: `exp_avg.${name}`, shape: [m.length], data: m },
    { name: `exp_avg_sq.${name}`, shape: [m.length], data: state.v.get(name)! },
  ]);
  for (const [name, q] of state.quantized ?? []) {
    const words = (data: Uint32Array) => new Int32Array(data.buffer, data.byteOffset, data.length);
    tensors.push(
      { name: `state1.${name}`, shape: [q.state1.length], data: words(q.state1), dtype: 'I32' },
      { name: `state2.${name}`, shape: [q.state2.length], data: words(q.state2), dtype: 'I32' },
      { name: `absmax1.${name}`, shape: [q.absmax1.length], data: q.absmax1 },
      { name: `absmax2.${name}`, shape: [q.absmax2.length], data: q.absmax2 },
    );
  }
  return tensors;
}

/** `parameters`: the model's tensors; each needs both moments in the file, at its element count. */
export function decodeOptimizerState(bytes: Uint8Array, file: string, parameters: readonly ArenaEntry[]): AdamWState {
  const { header, tensors } = parseSafetensors(bytes, file);
  const step = Number(header.metadata?.step);
  if (!Number.isInteger(step) || step < 0)
    throw new Error(`${file}: metadata "step" must be a non-negative integer, got ${header.metadata?.step}`);
  const take = (name: string, size: number): Float32Array => {
    const data = tensors.get(name);
    if (data instanceof Int32Array) throw new Error(`${file}: tensor ${name} is I32, expected F32 moments`);
    if (!data)
      throw new Error(
        `${file}: missing tensor ${name} (the optimizer state of another model, or of an older version of this engine)`,
      );
    if (data.length !== size)
      throw new Error(`${file}: tensor ${name} has ${data.length} values, the model's optimizer needs ${size}`);
    const bad = firstNonFinite(data);
    // A non-finite moment would turn the first update of every weight it belongs to into NaN.
    if (bad >= 0)
      throw new Error(
        `${file}: ${describeNonFinite(name, data, bad, [size])}; refusing to resume from a non-finite optimizer state`,
      );
    return Float32Array.from(data);
  };
  const codes = (name: string, size: number): Uint32Array => {
    const data = tensors.get(name);
    if (!(data instanceof Int32Array) || data.length !== size)
      throw new Error(`${file}: tensor ${name} must be I32 of ${size} words (four 8-bit codes each)`);
    return new Uint32Array(data.buffer, data.byteOffset, data.length).slice();
  };
  const eightBit = parameters.filter((p) => tensors.has(`state1.${p.name}`));
  const full = parameters.filter((p) => !tensors.has(`state1.${p.name}`));
  const moments = (prefix: string) =>
    new Map(full.map((p) => [p.name, take(`${prefix}.${p.name}`, elementCount(p.shape))]));
  const quantized = new Map<string, QuantizedMoments>(
    eightBit.map((p) => {
      const { words, blocks } = adamw8bitSizes(elementCount(p.shape));
      return [
        p.name,
        {
          state1: codes(`state1.${p.name}`, words),
          state2: codes(`state2.${p.name}`, words),
          absmax1: take(`absmax1.${p.name}`, blocks),
          absmax2: take(`absmax2.${p.name}`, blocks),
        },
      ];
    }),
  );
  return { step, m: moments('exp_avg'), v: moments('exp_avg_sq'), ...(quantized.size > 0 && { quantized }) };
}
