// What the server has done since it started, as /metrics reports it (Prometheus' text format, the counters vLLM and
// SGLang expose under their own prefixes): requests answered with success per route, and tokens generated. A
// trainer or a test reads them to see that each server took weight loads and served its share of the prompts.

/** The metric names' prefix (vLLM writes `vllm:`, SGLang `sglang:`). */
const PREFIX = 'webgpu_rlhf';

export class ServeCounters {
  private readonly requests = new Map<string, number>();
  private tokens = 0;

  /** A POST route answered with success (200). */
  answered(route: string): void {
    this.requests.set(route, (this.requests.get(route) ?? 0) + 1);
  }

  generated(tokens: number): void {
    this.tokens += tokens;
  }

  prometheusText(): string {
    const lines = [
      `# HELP ${PREFIX}:requests_total POST requests answered with success, per route.`,
      `# TYPE ${PREFIX}:requests_total counter`,
      ...[...this.requests].sort().map(([route, n]) => `${PREFIX}:requests_total{route="${route}"} ${n}`),
      `# HELP ${PREFIX}:generation_tokens_total Tokens generated (every sample's, its stop token included).`,
      `# TYPE ${PREFIX}:generation_tokens_total counter`,
      `${PREFIX}:generation_tokens_total ${this.tokens}`,
    ];
    return `${lines.join('\n')}\n`;
  }
}

/** One counter's value in a /metrics text (0 when absent): `name` with its labels, e.g. 'requests_total{route="/generate"}'. */
export function counterValue(text: string, name: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${PREFIX}:${name} `));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}
