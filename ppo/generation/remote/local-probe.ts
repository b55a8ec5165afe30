// The trainer's side of the rollout servers' fingerprint: the actor's own teacher-forced log-probs of the probe
// sequence (temperature 1, LoRA adapters included), which a server serving the same weights must reproduce.
import type { Engine } from '../../../engine/index.ts';
import type { CausalLm } from '../../../models/causal-lm.ts';
import { destroyTokenBatch, uploadTokenBatch } from '../../../models/token-batch.ts';

/** log p(ids[t] | ids[<t]) for t = 1 … L−1 under the actor's current weights. */
export async function localProbeLogProbs(engine: Engine, actor: CausalLm, ids: readonly number[]): Promise<number[]> {
  const L = ids.length;
  const batch = uploadTokenBatch(
    engine,
    { inputIds: [ids], attentionMask: [ids.map(() => 1)], positionIds: [ids.map((_, t) => t)] },
    actor.config.vocabSize,
    'probe',
  );
  // The last position has no next token; its target is any id, and its log-prob is dropped.
  const targets = engine.tensorFrom('probe.targets', [L], [...ids.slice(1), 0], 'u32');
  try {
    const { logprobs } = actor.tokenLogprobs(batch, targets, { temperature: 1, saveForBackward: false });
    return Array.from((await engine.read(logprobs)).subarray(0, L - 1));
  } finally {
    engine.destroyTensor(targets);
    destroyTokenBatch(engine, batch);
  }
}
