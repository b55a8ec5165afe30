// CPU reference of kernels/decode/logits-processors (float64): one row's logits after the repetition penalty over its
// prompt and generated tokens, presence and frequency penalties over the generated, logit_bias, EOS masking before
// min_tokens and min_p, in vLLM's order (ignore_eos changes no logit: it reopens the row); masked entries are
// -Infinity.
import type { RowProcessing } from './logits-processors.ts';

export function processLogitsRef(
  logits: ArrayLike<number>,
  p: RowProcessing,
  generated: readonly number[],
  eosIds: readonly number[],
  temperature: number,
  prompt: readonly number[] = [],
): number[] {
  const out = Array.from(logits);
  if (p.repetitionPenalty !== 1)
    for (const t of new Set([...prompt, ...generated]))
      out[t] = out[t] > 0 ? out[t] / p.repetitionPenalty : out[t] * p.repetitionPenalty;
  const counts = new Map<number, number>();
  for (const t of generated) counts.set(t, (counts.get(t) ?? 0) + 1);
  for (const [t, c] of counts) out[t] -= p.presencePenalty + p.frequencyPenalty * c;
  for (const [t, bias] of p.logitBias) out[t] += bias;
  if (generated.length < p.minTokens) for (const e of eosIds) out[e] = -Infinity;
  if (p.minP > 0 && temperature > 0) {
    const floor = Math.max(...out) + temperature * Math.log(p.minP);
    for (let v = 0; v < out.length; v++) if (out[v] < floor) out[v] = -Infinity;
  }
  return out;
}
