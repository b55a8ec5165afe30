// The no-cache rollout: the reference test/webgpu/rollout.test.ts checks the cached rollout (ppo/phases/rollout.ts)
// against, and the baseline tools/bench/rollout.ts times it against. Not part of training.
import type { CausalLm } from '../../models/causal-lm.ts';
import { uploadTokenBatch, destroyTokenBatch } from '../../models/token-batch.ts';
import { sampleTokens } from '../../kernels/decode/sample.ts';
import { checkRolloutConfig, type RolloutBatch, type RolloutConfig } from '../../ppo/generation/types.ts';
import { TurnProgress, assemble, promptBatch, singleTurnRecords } from '../../ppo/generation/sample-records.ts';
import { SamplerState } from '../../ppo/generation/sampler-state.ts';

const RECOMPUTE_BUCKET = 16;

/**
 * The same rollout without a cache: every step runs the whole sequence so far through CausalLm.logits and
 * reads the sampled ids back. The reference of the cached path (greedy tokens must agree exactly) and its
 * benchmark baseline; samples draw the same random numbers as in the cached path.
 */
export async function generateWithoutCache(
  lm: CausalLm,
  promptIds: readonly (readonly number[])[],
  c: RolloutConfig,
): Promise<RolloutBatch> {
  const e = lm.engine;
  const V = lm.config.vocabSize;
  checkRolloutConfig(promptIds, c, V, null);
  const prompts = promptBatch(promptIds, c);
  const N = prompts.groupIds.length;
  const R = c.maxResponseLength;
  const samples = prompts.groupIds.map(() => new TurnProgress(c, [], c.stopStrings ?? [], R));
  const state = new SamplerState(e, N, N, R, c.eosTokenIds);
  const { temperature, topK, topP, seed } = c;
  state.startRows(
    0,
    prompts.lengths.map((n, i) => ({
      sampling: { temperature, topK, topP, seed, stream: i, outRow: i },
      position: n - 1,
    })),
  );
  const sequences = prompts.ids.map((row) => [...row]);
  const masks = prompts.mask.map((row) => [...row]);
  for (let step = 0; step < R && samples.some((s) => !s.done); step++) {
    const T = prompts.P + step;
    // Right-padded to a multiple of RECOMPUTE_BUCKET: causal attention keeps the padding out of every real
    // position, and the trunk allocates one workspace per bucket rather than per length.
    const padded = Math.ceil(T / RECOMPUTE_BUCKET) * RECOMPUTE_BUCKET;
    const padding = (value: number) => new Array<number>(padded - T).fill(value);
    const batch = uploadTokenBatch(
      e,
      {
        inputIds: sequences.map((row) => [...row, ...padding(c.padTokenId)]),
        attentionMask: masks.map((row) => [...row, ...padding(0)]),
      },
      V,
      'rollout.recompute',
    );
    const logits = lm.logits(batch, e.tensor('rollout.recompute.logits', [N * padded, V]));
    sampleTokens(e, {
      logits,
      V,
      rows: N,
      rowStride: padded,
      rowOffset: T - 1,
      ...state.view(N),
      tokens: state.tokens,
      logprobs: state.logprobs,
      outStride: R,
      padId: c.padTokenId,
    });
    const next = await e.read(state.ids);
    destroyTokenBatch(e, batch);
    e.destroyTensor(logits);
    for (const [i, s] of samples.entries()) {
      if (!s.done) await s.take([next[i]]);
      if (s.reason === 'stop') state.finish(i);
      sequences[i].push(next[i]);
      masks[i].push(1);
    }
  }
  const logprobs = await e.read(state.logprobs);
  const records = singleTurnRecords(
    samples,
    samples.map((s, i) => logprobs.subarray(i * R, i * R + s.tokens.length)),
  );
  state.destroy();
  return assemble(prompts, records, c);
}
