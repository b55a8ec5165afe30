// What the server has done since it started, as /metrics reports it (Prometheus' text format, the counters vLLM and
// SGLang expose under their own prefixes): requests answered with success per route, tokens generated, and decode
// steps and prefills with the rows they took. A trainer or a test reads them to see that each server took weight
// loads and served its share of the prompts; the row-steps show what the decode batch cost (a batch holds only the
// rows with samples); the prefills, in how many groups the requests joined it; the aborted requests, the work
// clients gave up on.

/** The metric names' prefix (vLLM writes `vllm:`, SGLang `sglang:`). */
const PREFIX = 'webgpu_rlhf';

export class ServeCounters {
  private readonly requests = new Map<string, number>();
  private tokens = 0;
  private decodeSteps = 0;
  private decodeRowSteps = 0;
  private abortedRequests = 0;
  private prefills = 0;
  private prefillRows = 0;

  /** A POST route answered with success (200). */
  answered(route: string): void {
    this.requests.set(route, (this.requests.get(route) ?? 0) + 1);
  }

  generated(tokens: number): void {
    this.tokens += tokens;
  }

  /** A request ended before its samples did: its client went away, or /abort_request named it. */
  aborted(): void {
    this.abortedRequests++;
  }

  /** One decode step of the batch, over `rows` rows. */
  decoded(rows: number): void {
    this.decodeSteps++;
    this.decodeRowSteps += rows;
  }

  /** One prefill of `rows` waiting samples admitted together. */
  prefilled(rows: number): void {
    this.prefills++;
    this.prefillRows += rows;
  }

  prometheusText(): string {
    const lines = [
      `# HELP ${PREFIX}:requests_total POST requests answered with success, per route.`,
      `# TYPE ${PREFIX}:requests_total counter`,
      ...[...this.requests].sort().map(([route, n]) => `${PREFIX}:requests_total{route="${route}"} ${n}`),
      `# HELP ${PREFIX}:generation_tokens_total Tokens generated (every sample's, its stop token included).`,
      `# TYPE ${PREFIX}:generation_tokens_total counter`,
      `${PREFIX}:generation_tokens_total ${this.tokens}`,
      `# HELP ${PREFIX}:decode_steps_total Decode steps of the continuous batch (one token for each of its rows).`,
      `# TYPE ${PREFIX}:decode_steps_total counter`,
      `${PREFIX}:decode_steps_total ${this.decodeSteps}`,
      `# HELP ${PREFIX}:decode_row_steps_total Rows decoded, summed over the decode steps: what the batch cost.`,
      `# TYPE ${PREFIX}:decode_row_steps_total counter`,
      `${PREFIX}:decode_row_steps_total ${this.decodeRowSteps}`,
      `# HELP ${PREFIX}:prefills_total Prefills: groups of waiting samples admitted to the batch together.`,
      `# TYPE ${PREFIX}:prefills_total counter`,
      `${PREFIX}:prefills_total ${this.prefills}`,
      `# HELP ${PREFIX}:prefill_rows_total Samples prefilled, summed over the prefills.`,
      `# TYPE ${PREFIX}:prefill_rows_total counter`,
      `${PREFIX}:prefill_rows_total ${this.prefillRows}`,
      `# HELP ${PREFIX}:aborted_requests_total Requests aborted by their client (it went away) or by /abort_request.`,
      `# TYPE ${PREFIX}:aborted_requests_total counter`,
      `${PREFIX}:aborted_requests_total ${this.abortedRequests}`,
    ];
    return `${lines.join('\n')}\n`;
  }
}

/**
 * One counter's value in a /metrics text (0 when absent): `name` with its labels, e.g.
 * 'requests_total{route="/generate"}'.
 */
export function counterValue(text: string, name: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${PREFIX}:${name} `));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}
