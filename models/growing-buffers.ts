// Work tensors for calls of any shape: each named tensor is allocated for the largest request so far and a call
// gets a view of its prefix. A model whose batch shape changes from call to call (token-budget micro-batches,
// continuous-batching prefills) then holds one set of buffers, the size of its largest call, instead of one set
// per shape it has seen.
import type { Engine, Tensor, DType } from '../engine/index.ts';
import { elementCount } from '../engine/index.ts';

export class GrowingBuffers {
  private readonly tensors = new Map<string, Tensor>();
  /** Counts reallocations: views taken before a change of generation may point at destroyed buffers. */
  generation = 0;

  constructor(
    private readonly engine: Engine,
    private readonly label: string,
  ) {}

  /**
   * A `shape` view of the buffer `name`, reallocated when smaller (its previous contents and views are gone).
   * `fill`: the value a new allocation holds (constant tensors such as a column of ones).
   */
  get<D extends DType = 'f32'>(
    name: string,
    shape: readonly number[],
    dtype: D = 'f32' as D,
    fill?: number,
  ): Tensor<D> {
    const key = `${this.label}.${name}`;
    const size = elementCount(shape);
    let t = this.tensors.get(key);
    if (!t || t.size < size || t.dtype !== dtype) {
      if (t) this.engine.destroyTensor(t);
      this.generation++;
      t =
        fill === undefined
          ? this.engine.tensor(key, [size], dtype)
          : this.engine.tensorFrom(key, [size], new Array<number>(size).fill(fill), dtype);
      this.tensors.set(key, t);
    }
    return t.view(key, 0, shape) as Tensor<D>;
  }

  /** Bytes allocated for the buffers whose name starts with `prefix` (all by default). */
  bytes(prefix = ''): number {
    let total = 0;
    for (const [key, t] of this.tensors) if (key.startsWith(`${this.label}.${prefix}`)) total += t.byteLength;
    return total;
  }

  /** Frees every buffer; a later `get` allocates again (a new generation: earlier views are gone). */
  destroy(): void {
    for (const t of this.tensors.values()) this.engine.destroyTensor(t);
    this.tensors.clear();
    this.generation++;
  }
}
