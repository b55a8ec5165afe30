// AdamW state (step count and both moments of every arena segment) as safetensors bytes, so a checkpoint can
// resume training exactly. Browser-safe: bytes in, bytes out.
import { parseSafetensors, serializeSafetensors } from '../../models/safetensors.ts';
import type { AdamWState } from '../phases/adamw-optimizer.ts';

export function encodeOptimizerState(state: AdamWState): Uint8Array {
  const tensors = state.m.flatMap((m, i) => [
    { name: `exp_avg.${i}`, shape: [m.length], data: m },
    { name: `exp_avg_sq.${i}`, shape: [state.v[i].length], data: state.v[i] },
  ]);
  return serializeSafetensors(tensors, { format: 'pt', step: String(state.step) });
}

export function decodeOptimizerState(bytes: Uint8Array, file: string, segmentSizes: readonly number[]): AdamWState {
  const { header, tensors } = parseSafetensors(bytes, file);
  const step = Number(header.metadata?.step);
  if (!Number.isInteger(step) || step < 0) throw new Error(`${file}: metadata "step" must be a non-negative integer, got ${header.metadata?.step}`);
  const take = (name: string, size: number): Float32Array => {
    const data = tensors.get(name);
    if (!data) throw new Error(`${file}: missing tensor ${name}`);
    if (data.length !== size) throw new Error(`${file}: tensor ${name} has ${data.length} values, the model's optimizer needs ${size}`);
    return Float32Array.from(data);
  };
  return {
    step,
    m: segmentSizes.map((size, i) => take(`exp_avg.${i}`, size)),
    v: segmentSizes.map((size, i) => take(`exp_avg_sq.${i}`, size)),
  };
}
