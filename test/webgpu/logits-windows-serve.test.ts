// serve.js with logits windows: stories260K served from an engine that pretends to bind at most 128 KiB
// (WEBGPU_MAX_BINDING_BYTES), where one binding holds 64 rows of its 512 logits (2 KiB a row), beside the unsplit
// server in this process (ModelHost + ServeHttp, what serve.js runs). One request of n = 72 samples decodes 72 rows
// at once (the widest activation, gate/up's 344 floats, allows 95), so every decode step's logits, and the prefill's
// gathered from its groups, come in two windows (64 + 8 rows); the logits processors (penalties, logit_bias, min_p),
// the top log-probs and the sampler run window by window. The completions' tokens, log-probs and top log-probs must
// equal the unsplit server's, bit for bit. Prompts of 2 tokens keep the prefill's groups (47 rows) on the tiled LM
// head, as the whole batch's 72 rows are (kernels/matmul/matmul.ts: 32 rows and fewer take the register kernel).
import { it, expect, vi } from 'vitest';
import { describeWithFixtures } from '../support/fixtures.ts';
import { IncrementalDecoder } from '../../models/incremental-decoder.ts';
import { type Served, type SplitServeOptions, postJson, splitServersForSuite } from '../support/split-servers.ts';

const SAMPLES = 72;

const OPTIONS: SplitServeOptions = {
  maxPromptTokens: 2,
  maxNewTokens: 12,
  maxSlots: SAMPLES,
  maxRequestSamples: SAMPLES,
};

async function complete(s: Served, body: Record<string, unknown>): Promise<any[]> {
  return (await postJson(s, '/v1/completions', { model: 'stories', prompt: [1, 403], ...body })).choices;
}

describeWithFixtures('serve.js: logits windows (stories260K)', ['hf/stories260K/model.safetensors'], () => {
  const servers = splitServersForSuite(OPTIONS, 128 * 1024);

  it('72 rows at once, above one binding of logits: per-row sampling with penalties and top log-probs, the unsplit server bit for bit', async () => {
    const request = {
      n: SAMPLES,
      max_tokens: 12,
      temperature: 0.9,
      top_p: 0.95,
      top_k: 40,
      seed: 5,
      logprobs: 3,
      presence_penalty: 0.4,
      frequency_penalty: 0.3,
      repetition_penalty: 1.2,
      min_p: 0.02,
      logit_bias: { '13': 2, '100': -1.5 },
    };
    const results = [];
    for (const s of [servers.whole, servers.split]) {
      const dispatch = vi.spyOn(s.engine, 'dispatch');
      const extend = vi.spyOn(IncrementalDecoder.prototype, 'extend');
      const choices = await complete(s, request);
      const samplers = dispatch.mock.calls.filter(([spec]) => spec.name.startsWith('sample/')).length;
      const steps = extend.mock.calls.filter(([input]) => input.T === 1);
      const rows = Math.max(...steps.map(([input]) => input.ids.size));
      dispatch.mockRestore();
      extend.mockRestore();
      results.push({ choices, samplers, steps: steps.length, rows });
    }
    const [expected, actual] = results;
    expect([expected.rows, actual.rows]).toEqual([SAMPLES, SAMPLES]);
    expect(expected.samplers).toBe(expected.steps + 1);
    expect(actual.samplers).toBeGreaterThan(actual.steps + 1);
    expect(new Set(expected.choices.map((c) => c.text)).size).toBeGreaterThan(10);
    expect(expected.choices[SAMPLES - 1].logprobs.top_logprobs[0]).toBeTruthy();
    expect(actual.choices).toEqual(expected.choices);
  });
});
