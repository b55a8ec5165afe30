// Averages update metrics the way verl reports them: loss terms summed over a mini-batch's micro-batches (they
// are already scaled to the mini-batch) then averaged over mini-batches; ratios averaged weighted by tokens.

export class MetricAccumulator {
  private readonly sums = new Map<string, { total: number; weight: number }>();
  private readonly perMiniBatch = new Map<string, Map<readonly number[], number>>();
  private readonly extremes = new Map<string, { value: number; pick: (a: number, b: number) => number }>();

  /** A term of the mini-batch `key` (its row list identifies it) that adds up across its micro-batches. */
  addSum(miniBatch: readonly number[], name: string, value: number): void {
    let byMini = this.perMiniBatch.get(name);
    if (!byMini) this.perMiniBatch.set(name, (byMini = new Map()));
    byMini.set(miniBatch, (byMini.get(miniBatch) ?? 0) + value);
  }

  /** A value to average with `weight`. */
  addMean(name: string, value: number, weight: number): void {
    const entry = this.sums.get(name) ?? { total: 0, weight: 0 };
    entry.total += value * weight;
    entry.weight += weight;
    this.sums.set(name, entry);
  }

  /** The smallest (Math.min) or largest (Math.max) value seen, as verl's AggregationType.MIN / MAX metrics. */
  addExtreme(name: string, value: number, pick: (a: number, b: number) => number): void {
    const entry = this.extremes.get(name);
    this.extremes.set(name, { value: entry ? pick(entry.value, value) : value, pick });
  }

  result(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [name, byMini] of this.perMiniBatch) {
      const values = [...byMini.values()];
      out[name] = values.reduce((a, b) => a + b, 0) / values.length;
    }
    for (const [name, { total, weight }] of this.sums) out[name] = weight > 0 ? total / weight : 0;
    for (const [name, { value }] of this.extremes) out[name] = value;
    return out;
  }
}
