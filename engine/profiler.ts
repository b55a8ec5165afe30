// Per-kernel GPU time from timestamp queries (WEBGPU_PROFILE=1 on a device with timestamp-query): each
// dispatch gets its own pass with begin/end timestamps; times are summed by kernel name.

const QUERY_CAPACITY = 4096;

export interface KernelTiming {
  kernel: string;
  calls: number;
  totalMs: number;
}

export class Profiler {
  private readonly querySet: GPUQuerySet;
  private readonly resolveBuffer: GPUBuffer;
  private pending: { names: string[]; readback: GPUBuffer }[] = [];
  private names: string[] = [];
  private readonly totals = new Map<string, KernelTiming>();

  constructor(private readonly device: GPUDevice) {
    this.querySet = device.createQuerySet({ type: 'timestamp', count: QUERY_CAPACITY });
    this.resolveBuffer = device.createBuffer({
      size: QUERY_CAPACITY * 8,
      usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC,
    });
  }

  nextWrites(kernel: string): GPUComputePassTimestampWrites {
    if (this.names.length * 2 >= QUERY_CAPACITY) throw new Error('profiler: too many dispatches in one submit');
    const index = this.names.length * 2;
    this.names.push(kernel);
    return { querySet: this.querySet, beginningOfPassWriteIndex: index, endOfPassWriteIndex: index + 1 };
  }

  resolve(encoder: GPUCommandEncoder): void {
    if (this.names.length === 0) return;
    const count = this.names.length * 2;
    const readback = this.device.createBuffer({
      size: count * 8,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
    encoder.resolveQuerySet(this.querySet, 0, count, this.resolveBuffer, 0);
    encoder.copyBufferToBuffer(this.resolveBuffer, 0, readback, 0, count * 8);
    this.pending.push({ names: this.names, readback });
    this.names = [];
  }

  async collect(): Promise<void> {
    const pending = this.pending;
    this.pending = [];
    for (const { names, readback } of pending) {
      await readback.mapAsync(GPUMapMode.READ);
      const stamps = new BigUint64Array(readback.getMappedRange());
      names.forEach((kernel, i) => {
        const ms = Number(stamps[2 * i + 1] - stamps[2 * i]) / 1e6;
        const entry = this.totals.get(kernel) ?? { kernel, calls: 0, totalMs: 0 };
        entry.calls++;
        entry.totalMs += ms;
        this.totals.set(kernel, entry);
      });
      readback.unmap();
      readback.destroy();
    }
  }

  report(): KernelTiming[] {
    return [...this.totals.values()].sort((a, b) => b.totalMs - a.totalMs);
  }

  reset(): void {
    this.totals.clear();
  }
}
