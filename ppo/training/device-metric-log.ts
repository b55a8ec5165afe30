// The update's scalars (each micro-batch's loss outputs, each mini-batch's gradient norm) kept on the device until
// the update ends: each is copied into one log tensor as it is produced, and the whole log comes back in one
// read-back, so an update drains the pipeline once however many micro-batches and mini-batches it has. Each
// recorded value's consumer then runs in recording order, as it would have right after its own read.
//
// The finite guard (finite-guard.ts) therefore sees a non-finite loss at the end of the update rather than at its
// micro-batch; the weights stay safe meanwhile, because adamw.wgsl skips every step whose gradient norm is not
// finite, and the step still ends with the same first non-finite tensor named and nothing saved.
import type { Engine, Tensor } from '../../engine/index.ts';

interface Entry {
  offset: number;
  length: number;
  consume: (values: Float32Array) => void;
}

export class DeviceMetricLog {
  private log: Tensor<'f32'> | null = null;
  private used = 0;
  private readonly entries: Entry[] = [];

  constructor(
    private readonly engine: Engine,
    private readonly label: string,
  ) {}

  /** Forgets what an update that failed midway recorded and never flushed. */
  clear(): void {
    this.entries.length = 0;
    this.used = 0;
  }

  /** Copies `source` (f32) into the log now, in queue order; `consume` gets its values at flush(). */
  record(source: Tensor, consume: (values: Float32Array) => void): void {
    if (source.dtype !== 'f32')
      throw new Error(`metric log ${this.label}: tensor ${source.name} is ${source.dtype}, expected f32`);
    const log = this.reserve(this.used + source.size);
    this.engine.copy(source, log.view(`${this.label}[${this.used}]`, this.used, [source.size]));
    this.entries.push({ offset: this.used, length: source.size, consume });
    this.used += source.size;
  }

  /** Reads the log back (one read) and hands each entry its values, in recording order; the log is then empty. */
  async flush(): Promise<void> {
    if (!this.log || this.entries.length === 0) return;
    const values = await this.engine.read(this.log.view(this.label, 0, [this.used]));
    const entries = this.entries.splice(0);
    this.used = 0;
    for (const { offset, length, consume } of entries) consume(values.subarray(offset, offset + length));
  }

  /** The log tensor, grown (doubling, its recorded part copied over) to hold at least `size` values. */
  private reserve(size: number): Tensor<'f32'> {
    if (this.log && this.log.size >= size) return this.log;
    const grown = this.engine.tensor(this.label, [Math.max(size, 2 * (this.log?.size ?? 0), 256)]);
    if (this.log) {
      if (this.used > 0)
        this.engine.copy(this.log.view(this.label, 0, [this.used]), grown.view(this.label, 0, [this.used]));
      this.engine.destroyTensor(this.log);
    }
    this.log = grown;
    return grown;
  }
}
