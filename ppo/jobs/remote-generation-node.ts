// The command line's rollout servers: the pool of actor_rollout_ref.rollout.server_urls with its deadlines and
// retries, and the actor's weights published under trainer.rollout_weights_dir (by default inside the run directory).
import { join } from 'node:path';
import type { Engine } from '../../engine/index.ts';
import type { PpoConfig } from '../config.ts';
import type { ModelWeights } from '../trainer.ts';
import { ServerPool } from '../generation/remote/server-pool.ts';
import { ServerRollout } from '../generation/remote/remote-generation.ts';
import { diskWeightsPublisher } from './weights-publisher-node.ts';

export const DEFAULT_WEIGHTS_SUBDIR = 'rollout_weights';

export function rolloutServers(
  engine: Engine,
  config: PpoConfig,
  actor: ModelWeights,
  tokenizerFiles: Record<string, string>,
  generationConfig: Record<string, unknown> | undefined,
  warn: (line: string) => void,
  stop?: AbortSignal,
): ServerRollout {
  const r = config.actor_rollout_ref.rollout;
  const backend = r.name === 'vllm' ? 'vllm' : 'sglang';
  const pool = new ServerPool(r.server_urls, {
    timeoutS: r.server_timeout_s,
    maxRetries: r.server_max_retries,
    onServerLost: (url, reason) => warn(`rollout server ${url} left the pool: ${reason}`),
    stop,
  });
  const dir = config.trainer.rollout_weights_dir ?? join(config.trainer.default_local_dir, DEFAULT_WEIGHTS_SUBDIR);
  const publisher = diskWeightsPublisher(dir, backend, { engine, actor, config, tokenizerFiles, generationConfig });
  return new ServerRollout(pool, backend, publisher, {
    fingerprintTolerance: r.server_fingerprint_tol,
    vocabSize: actor.config.vocabSize,
  });
}
