// The run's metrics as `node train.js` writes them to metrics.jsonl: one line per PPO step and one per validation,
// verl's metric names, so `node tools/plot.js` draws a downloaded log as it draws a Node run's.
export class MetricsLog {
  private lines: string[] = [];

  get empty(): boolean {
    return this.lines.length === 0;
  }

  record(metrics: Record<string, number>): void {
    this.lines.push(JSON.stringify(metrics));
  }

  clear(): void {
    this.lines = [];
  }

  jsonl(): string {
    return this.lines.map((line) => `${line}\n`).join('');
  }
}
