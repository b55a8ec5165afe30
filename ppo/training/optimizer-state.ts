// AdamW state (step count and both moments of every parameter tensor, named as the arena names them) as
// safetensors bytes, so a checkpoint can resume training exactly — on this device or one whose binding limit
// packs the arena differently. Browser-safe: bytes in, bytes out.
import type { ArenaEntry } from '../../engine/index.ts';
import { elementCount } from '../../engine/index.ts';
import { parseSafetensors, serializeSafetensors } from '../../models/safetensors.ts';
import { describeNonFinite, firstNonFinite } from '../../models/non-finite.ts';
import type { AdamWState } from './adamw-optimizer.ts';

export function encodeOptimizerState(state: AdamWState): Uint8Array {
  const tensors = [...state.m].flatMap(([name, m]) => [
    { name: `exp_avg.${name}`, shape: [m.length], data: m },
    { name: `exp_avg_sq.${name}`, shape: [m.length], data: state.v.get(name)! },
  ]);
  return serializeSafetensors(tensors, { format: 'pt', step: String(state.step) });
}

/** `parameters`: the model's tensors; each needs both moments in the file, at its element count. */
export function decodeOptimizerState(bytes: Uint8Array, file: string, parameters: readonly ArenaEntry[]): AdamWState {
  const { header, tensors } = parseSafetensors(bytes, file);
  const step = Number(header.metadata?.step);
  if (!Number.isInteger(step) || step < 0)
    throw new Error(`${file}: metadata "step" must be a non-negative integer, got ${header.metadata?.step}`);
  const take = (name: string, size: number): Float32Array => {
    const data = tensors.get(name);
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
  const moments = (prefix: string) =>
    new Map(parameters.map((p) => [p.name, take(`${prefix}.${p.name}`, elementCount(p.shape))]));
  return { step, m: moments('exp_avg'), v: moments('exp_avg_sq') };
}
