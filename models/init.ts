// Fresh weights for a model trained from scratch (the embedded default task): Hugging Face's
// `_init_weights` for these architectures — normal(0, initializer_range) for linear and embedding weights,
// ones for RMSNorm weights, zeros for biases — drawn from a seeded generator so runs are reproducible.
import type { DecoderConfig } from './hf-config.ts';
import { parameterEntries } from './parameter-layout.ts';
import { elementCount } from '../engine/index.ts';

function gaussian(seed: number): () => number {
  let state = seed >>> 0 || 1;
  const uniform = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (((t ^ (t >>> 14)) >>> 0) + 0.5) / 4294967296;
  };
  return () => Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform());
}

export function initialParameters(
  config: DecoderConfig,
  seed: number,
  initializerRange = 0.02,
): Map<string, Float32Array> {
  const normal = gaussian(seed);
  const values = new Map<string, Float32Array>();
  for (const entry of parameterEntries(config)) {
    const data = new Float32Array(elementCount(entry.shape));
    const isNorm = /layernorm|norm\.weight$/.test(entry.name);
    if (isNorm) data.fill(1);
    else if (!entry.name.endsWith('.bias')) for (let i = 0; i < data.length; i++) data[i] = normal() * initializerRange;
    values.set(entry.name, data);
  }
  return values;
}
