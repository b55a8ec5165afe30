// serve.js with chunked prefill: stories260K served from an engine that pretends to bind at most 128 KiB
// (WEBGPU_MAX_BINDING_BYTES), whose widest activation (gate/up, 2I = 344 floats, 1,376 bytes a token) lets a call
// hold 95 tokens, beside the unsplit server in this process (ModelHost + ServeHttp, what serve.js runs). A 120-token
// prompt goes into the decode batch in two calls of 60 (the rollout's prefill, ppo/generation/decoders.ts feedBlock)
// and its 119 scored positions into the prompt scorer in two of 59 and 60 (64 rows of logits a binding); the
// completion's tokens and log-probs and the prompt's log-probs must equal the unsplit server's, bit for bit (every
// call above 32 rows: the same kernels).
import { it, expect, vi } from 'vitest';
import { seededRandom } from '../support/arrays.ts';
import { describeWithFixtures } from '../support/fixtures.ts';
import { IncrementalDecoder } from '../../models/incremental-decoder.ts';
import { type Served, type SplitServeOptions, postJson, splitServersForSuite } from '../support/split-servers.ts';

const OPTIONS: SplitServeOptions = {
  maxPromptTokens: 128,
  maxNewTokens: 16,
  maxSlots: 4,
  maxRequestSamples: 8,
};

const random = seededRandom(9);
const PROMPT = Array.from({ length: 120 }, () => 3 + Math.floor(random() * 509));

async function complete(s: Served, body: Record<string, unknown>): Promise<any> {
  return (await postJson(s, '/v1/completions', { model: 'stories', prompt: PROMPT, ...body })).choices[0];
}

describeWithFixtures('serve.js: chunked prefill (stories260K)', ['hf/stories260K/model.safetensors'], () => {
  const servers = splitServersForSuite(OPTIONS, 128 * 1024);

  it('a prompt above one binding: the tokens, their log-probs and the prompt log-probs of the unsplit server', async () => {
    const calls = (s: Served) => {
      const append = vi.spyOn(IncrementalDecoder.prototype, 'append');
      const extend = vi.spyOn(IncrementalDecoder.prototype, 'extend');
      return {
        widths: () => {
          const all = [...append.mock.calls, ...extend.mock.calls].map(([input]) => input.T).filter((T) => T > 1);
          append.mockRestore();
          extend.mockRestore();
          return all.sort((a, b) => a - b);
        },
        s,
      };
    };
    const results = [];
    for (const s of [servers.whole, servers.split]) {
      const spy = calls(s);
      const sampled = await complete(s, { max_tokens: 16, temperature: 0.8, seed: 5, logprobs: 1 });
      const prefills = spy.widths();
      const scoring = calls(s);
      const echoed = await complete(s, { max_tokens: 0, echo: true, logprobs: 2 });
      results.push({ sampled, prefills, echoed, scored: scoring.widths() });
    }
    const [expected, actual] = results;
    expect(expected.prefills).toEqual([120]);
    expect(actual.prefills).toEqual([60, 60]);
    expect(expected.scored).toEqual([119]);
    expect(actual.scored).toEqual([59, 60]);
    expect(expected.sampled.logprobs.tokens).toHaveLength(16);
    expect(actual.sampled.text).toBe(expected.sampled.text);
    expect(actual.sampled.logprobs).toEqual(expected.sampled.logprobs);
    expect(actual.echoed.logprobs.token_logprobs).toHaveLength(120);
    expect(actual.echoed.logprobs).toEqual(expected.echoed.logprobs);
  });
});
