// One pass for score + generate in serve.js: a request that scores its prompt (OpenAI's echo with logprobs, vLLM's
// prompt_logprobs, SGLang's return_logprob from logprob_start_len with token_ids_logprob) and generates gets its
// prompt log-probs out of its own prefill (every position's logits kept for the prompt-logprobs kernel) instead of a
// separate scoring pass. stories260K in this process (ModelHost + ServeHttp, what serve.js runs): the scores equal the
// separate pass's (a request with max_tokens 0) within 1e-6, the generated tokens those of the same request without
// scoring, and the request records fewer dispatches than generating and scoring apart. Under a 128 KiB binding the
// prefill keeps every position's logits in calls of 64 rows (chunked prefill), and the scores still agree.
import { it, expect } from 'vitest';
import { seededRandom } from '../support/arrays.ts';
import { describeWithFixtures } from '../support/fixtures.ts';
import { type Served, type SplitServeOptions, postJson, splitServersForSuite } from '../support/split-servers.ts';
import { PromptScorer } from '../../ppo/generation/prompt-scoring.ts';

const OPTIONS: SplitServeOptions = {
  maxPromptTokens: 128,
  maxNewTokens: 16,
  maxSlots: 4,
  maxRequestSamples: 8,
  maxLogprobs: -1,
};

const random = seededRandom(4);
const prompt = (n: number) => Array.from({ length: n }, () => 3 + Math.floor(random() * 509));
const PROMPTS = [prompt(40), prompt(100)];

/** A request's response and the dispatches it recorded (requests run one at a time). */
async function post(s: Served, path: string, body: unknown): Promise<{ json: any; dispatches: number }> {
  const before = s.engine.dispatchCount;
  const json = await postJson(s, path, body);
  return { json, dispatches: s.engine.dispatchCount - before };
}

function expectClose(actual: (number | null)[], expected: (number | null)[], what: string, bound = 1e-6): void {
  expect(actual.length, what).toBe(expected.length);
  const gap = Math.max(...actual.map((x, i) => Math.abs((x ?? 0) - (expected[i] ?? 0))));
  expect(gap, what).toBeLessThanOrEqual(bound);
}

describeWithFixtures(
  'serve.js: prompt log-probs from the prefill (stories260K)',
  ['hf/stories260K/model.safetensors'],
  () => {
    const servers = splitServersForSuite(OPTIONS, 128 * 1024);

    for (const which of ['unsplit', '128 KiB binding'] as const) {
      it(`completions with echo: the separate pass's scores, the tokens of generating alone, fewer dispatches (${which})`, async () => {
        const s = which === 'unsplit' ? servers.whole : servers.split;
        // Warm the separate scorer and the decode loop (its first decoder transposes the weights for decode steps on
        // CPU devices), so that neither's first use is in the counts below.
        await post(s, '/v1/completions', {
          model: 'stories',
          prompt: PROMPTS[0],
          max_tokens: 0,
          echo: true,
          logprobs: 1,
        });
        await post(s, '/v1/completions', { model: 'stories', prompt: PROMPTS[0], max_tokens: 2 });
        for (const ids of PROMPTS) {
          // ignore_eos: every sample decodes its 8 tokens, so the decode steps (and dispatches) do not depend on when
          // the server reads an ending.
          const request = { model: 'stories', prompt: ids, temperature: 0.8, seed: 3, ignore_eos: true };
          const both = await post(s, '/v1/completions', { ...request, max_tokens: 8, echo: true, logprobs: 3 });
          const generated = await post(s, '/v1/completions', { ...request, max_tokens: 8, logprobs: 3 });
          const scored = await post(s, '/v1/completions', { ...request, max_tokens: 0, echo: true, logprobs: 3 });
          const [b, g, sc] = [both, generated, scored].map((r) => r.json.choices[0].logprobs);
          // echo: the prompt's entries first (the first token's log-prob null), then the generated tokens'.
          const P = ids.length;
          expectClose(b.token_logprobs.slice(0, P), sc.token_logprobs, `prompt of ${P}: log-probs`);
          expect(b.tokens.slice(0, P)).toEqual(sc.tokens);
          const alternatives = (tops: Record<string, number>[]) => tops.slice(1, P);
          expect(alternatives(b.top_logprobs).map(Object.keys)).toEqual(alternatives(sc.top_logprobs).map(Object.keys));
          expectClose(
            alternatives(b.top_logprobs).flatMap(Object.values),
            alternatives(sc.top_logprobs).flatMap(Object.values),
            `prompt of ${P}: alternatives`,
          );
          // The generated tokens: those of the request that does not score. The first is drawn from the last row of
          // the every-position logits, whose LM head runs over the prompt's rows instead of one (another kernel on CPU
          // devices, the same sums in another order): its log-prob agrees to float rounding, measured 1.7e-6.
          expect(b.tokens.slice(P)).toEqual(g.tokens);
          expectClose(b.token_logprobs.slice(P), g.token_logprobs, `prompt of ${P}: generated tokens`, 1e-5);
          console.log(
            `${which}, prompt of ${P}: score+generate ${both.dispatches} dispatches, generate ${generated.dispatches}, ` +
              `score ${scored.dispatches}`,
          );
          expect(both.dispatches).toBeLessThan(generated.dispatches + scored.dispatches);
          // What scoring adds to the generation: the prompt-logprobs kernel per prefill call, and the LM head of a call
          // before the last (measured: 1 unsplit; 4 for the 100-token prompt in two calls under 128 KiB).
          expect(both.dispatches - generated.dispatches).toBeLessThanOrEqual(4);
        }
      });
    }

    it("vLLM's prompt_logprobs: -1 (every token, ranked on the host) and SGLang's token_ids_logprob, from the prefill", async () => {
      const ids = PROMPTS[1];
      const request = { model: 'stories', prompt: ids, temperature: 0, prompt_logprobs: -1 };
      const both = (await post(servers.whole, '/v1/completions', { ...request, max_tokens: 4 })).json.choices[0];
      const alone = (await post(servers.whole, '/v1/completions', { ...request, max_tokens: 0 })).json.choices[0];
      expect(both.prompt_logprobs).toHaveLength(ids.length);
      for (const [p, entry] of (
        both.prompt_logprobs as (Record<string, { logprob: number; rank: number }> | null)[]
      ).entries()) {
        if (p === 0) continue;
        const expected = alone.prompt_logprobs[p] as Record<string, { logprob: number; rank: number }>;
        expect(Object.keys(entry!)).toEqual(Object.keys(expected));
        expectClose(
          Object.values(entry!).map((e) => e.logprob),
          Object.values(expected).map((e) => e.logprob),
          `position ${p}`,
        );
      }
      const sglang = { input_ids: ids, return_logprob: true, logprob_start_len: 0, token_ids_logprob: [5, 77, 300] };
      const params = { temperature: 0 };
      const g = (
        await post(servers.whole, '/generate', { ...sglang, sampling_params: { ...params, max_new_tokens: 4 } })
      ).json;
      const a = (
        await post(servers.whole, '/generate', { ...sglang, sampling_params: { ...params, max_new_tokens: 0 } })
      ).json;
      const flat = (rows: ([number, number, null] | null)[][]) =>
        rows.flatMap((r) => (r ?? []).map((x) => x?.[0] ?? 0));
      expect(g.meta_info.input_token_ids_logprobs).toHaveLength(ids.length);
      expectClose(flat(g.meta_info.input_token_ids_logprobs), flat(a.meta_info.input_token_ids_logprobs), 'token ids');
      expectClose(
        g.meta_info.input_token_logprobs.map((x: [number | null]) => x[0]),
        a.meta_info.input_token_logprobs.map((x: [number | null]) => x[0]),
        'input tokens',
      );
    });

    it('a request that scores and generates runs no separate scoring pass', async () => {
      const score = PromptScorer.prototype.score;
      let calls = 0;
      PromptScorer.prototype.score = function (...args) {
        calls++;
        return score.apply(this, args);
      };
      try {
        await post(servers.whole, '/v1/completions', {
          model: 'stories',
          prompt: PROMPTS,
          max_tokens: 4,
          echo: true,
          logprobs: 1,
          n: 2,
        });
        expect(calls).toBe(0);
        await post(servers.whole, '/v1/completions', {
          model: 'stories',
          prompt: PROMPTS,
          max_tokens: 0,
          echo: true,
          logprobs: 1,
        });
        expect(calls).toBe(2);
      } finally {
        PromptScorer.prototype.score = score;
      }
    });
  },
);
