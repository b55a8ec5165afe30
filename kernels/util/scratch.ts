// Scratch tensors a launcher keeps between calls: one per engine and key, created on first use and reused,
// so a training step allocates nothing after its first iteration.
import type { Engine, Tensor } from '../../engine/index.ts';

const scratchByEngine = new WeakMap<Engine, Map<string, Tensor<'f32'>>>();

/** The zero-initialised scratch tensor named `key` with `shape` on this engine (contents persist between calls). */
export function scratchTensor(engine: Engine, key: string, shape: readonly number[]): Tensor<'f32'> {
  let byKey = scratchByEngine.get(engine);
  if (!byKey) {
    byKey = new Map();
    scratchByEngine.set(engine, byKey);
  }
  const fullKey = `${key}[${shape.join(',')}]`;
  let tensor = byKey.get(fullKey);
  if (!tensor) {
    tensor = engine.tensor(fullKey, shape);
    byKey.set(fullKey, tensor);
  }
  return tensor;
}
