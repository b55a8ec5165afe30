// The one-step-off prefetch of rollout.mode=async without a device or servers: which batch each step trains on and
// with which weights, that a weight load waits for the batch still generating, that a failed step puts the held batch
// back, and that a checkpoint's batch comes back as it was generated (or only as drawn, when its generation failed).
import { describe, expect, it } from 'vitest';
import {
  PrefetchedGeneration,
  type BatchDraw,
  type RolloutServers,
} from '../../ppo/generation/remote/prefetched-generation.ts';
import { assemble, promptBatch, type AssembledSample } from '../../ppo/generation/sample-records.ts';
import type { RolloutBatch, RolloutConfig } from '../../ppo/generation/types.ts';

interface Row {
  promptIds: number[];
}

const config = (seed: number): RolloutConfig => ({
  n: 1,
  maxResponseLength: 3,
  eosTokenIds: [2],
  padTokenId: 0,
  temperature: 1,
  topK: -1,
  topP: 1,
  seed,
});

/** A response [seed, 2] to each prompt, so a batch shows which draw's seed generated it. */
function generated(prompts: readonly (readonly number[])[], c: RolloutConfig): RolloutBatch {
  const samples = prompts.map(
    (): AssembledSample => ({ tokens: [c.seed, 2], logprobs: [-0.5, -0.25], generated: [1, 1], reason: 'eos' }),
  );
  return assemble(promptBatch(prompts, c), samples, c);
}

/** Servers whose generations resolve when the test says so, logging every load and generation. */
class FakeServers implements RolloutServers {
  servedVersion = -1;
  readonly log: string[] = [];
  readonly pending: { finish: () => void; fail: (err: Error) => void }[] = [];

  async syncWeights(version: number): Promise<Record<string, number>> {
    this.log.push(`load ${version}`);
    this.servedVersion = version;
    return { 'rollout_servers/weight_sync_s': 0 };
  }

  generate(prompts: readonly (readonly number[])[], c: RolloutConfig): Promise<RolloutBatch> {
    this.log.push(`generate seed ${c.seed} on ${this.servedVersion}`);
    return new Promise((resolve, reject) => {
      this.pending.push({ finish: () => resolve(generated(prompts, c)), fail: reject });
    });
  }

  /** Finishes every generation asked for so far. */
  finishAll(): void {
    for (const p of this.pending.splice(0)) p.finish();
  }
}

function prefetcher(servers: FakeServers | null) {
  let drawn = 0;
  const prefetch = new PrefetchedGeneration<Row>({
    draw: (): BatchDraw<Row> => {
      drawn++;
      return { records: [{ promptIds: [10 + drawn] }], seed: 100 + drawn };
    },
    rolloutConfig: config,
    localLogProbs: async () => [],
    vocabSize: 50,
  });
  prefetch.servers = servers;
  return prefetch;
}

const untimed = <T>(_: string, work: () => Promise<T>) => work();

/** Runs fromServers while the fake servers finish each generation as soon as it is asked for. */
async function serverStep(prefetch: PrefetchedGeneration<Row>, servers: FakeServers, step: number, next: boolean) {
  const batch = prefetch.fromServers(step, next, untimed);
  for (let i = 0; i < 10; i++) {
    await new Promise((r) => setTimeout(r, 0));
    servers.finishAll();
  }
  return batch;
}

describe('one-step-off prefetch (rollout.mode=async)', () => {
  it('trains each step on the batch the servers generated during the last one, a step stale', async () => {
    const servers = new FakeServers();
    const prefetch = prefetcher(servers);
    const first = await serverStep(prefetch, servers, 0, true);
    expect(first.records[0].promptIds).toEqual([11]);
    expect(first.rollout.responses[0].slice(0, 2)).toEqual([101, 2]);
    expect(first.envMetrics['rollout_servers/staleness']).toBe(0);
    const second = await serverStep(prefetch, servers, 1, false);
    // The second step's batch is the second draw, generated with the weights of step 0, before step 1's load.
    expect(second.records[0].promptIds).toEqual([12]);
    expect(second.rollout.responses[0].slice(0, 2)).toEqual([102, 2]);
    expect(second.envMetrics['rollout_servers/staleness']).toBe(1);
    expect(servers.log).toEqual(['load 0', 'generate seed 101 on 0', 'generate seed 102 on 0', 'load 1']);
    // The last step prefetched nothing: the next take draws anew.
    expect((await prefetch.take(untimed)).records[0].promptIds).toEqual([13]);
  });

  it('loads new weights only after the batch still generating has finished', async () => {
    const servers = new FakeServers();
    const prefetch = prefetcher(servers);
    const step = prefetch.fromServers(0, true, untimed);
    await new Promise((r) => setTimeout(r, 0));
    servers.pending.shift()!.finish();
    await step;
    // A validation at step 1 while the next batch is still generating on the weights of step 0.
    const validation = prefetch.generate(1, [[5]], config(7));
    await new Promise((r) => setTimeout(r, 0));
    expect(servers.log).toEqual(['load 0', 'generate seed 101 on 0', 'generate seed 102 on 0']);
    servers.finishAll();
    await new Promise((r) => setTimeout(r, 0));
    servers.finishAll();
    await validation;
    expect(servers.log.slice(3)).toEqual(['load 1', 'generate seed 7 on 1']);
  });

  it('a failed step drops the batch it prefetched and puts back the one held for it', async () => {
    const servers = new FakeServers();
    const prefetch = prefetcher(servers);
    await serverStep(prefetch, servers, 0, true);
    const mark = prefetch.mark();
    await serverStep(prefetch, servers, 1, true);
    prefetch.rewind(mark);
    const again = await prefetch.take(untimed);
    expect(again.records[0].promptIds).toEqual([12]);
    expect(again.generated?.weightVersion).toBe(0);
    prefetch.rewind(null);
    expect((await prefetch.take(untimed)).generated).toBeNull();
  });

  it("a checkpoint holds the next step's batch as generated, or as drawn when its generation failed", async () => {
    const servers = new FakeServers();
    const prefetch = prefetcher(servers);
    await serverStep(prefetch, servers, 0, true);
    const saved = await prefetch.snapshot();
    expect(saved).toMatchObject({ records: [{ promptIds: [12] }], seed: 102, weightVersion: 0 });
    expect(saved?.samples?.[0].tokens).toEqual([102, 2]);
    // Resumed in-process (no servers): the step trains on the saved generation.
    const resumed = prefetcher(null);
    resumed.restore(JSON.parse(JSON.stringify(saved)));
    const taken = await resumed.take(untimed);
    expect(taken.generated?.rollout.responses[0]).toEqual([102, 2, 0]);
    expect(taken.generated?.rollout.oldLogProbs[0]).toEqual(Float32Array.from([-0.5, -0.25, 0]));

    const failing = new FakeServers();
    const broken = prefetcher(failing);
    const step = broken.fromServers(0, true, untimed);
    await new Promise((r) => setTimeout(r, 0));
    failing.pending.shift()!.finish();
    await step;
    failing.pending.shift()!.fail(new Error('server died'));
    const drawnOnly = await broken.snapshot();
    expect(drawnOnly).toMatchObject({ records: [{ promptIds: [12] }], seed: 102, samples: null });
    const restored = prefetcher(null);
    restored.restore(drawnOnly);
    const next = await restored.take(untimed);
    expect([next.records[0].promptIds, next.seed, next.generated]).toEqual([[12], 102, null]);
    restored.restore(null);
    expect((await restored.take(untimed)).records[0].promptIds).toEqual([11]);
  });
});
