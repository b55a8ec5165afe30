// A decoder with random weights as the rollout takes it. The wide init (0.35) gives peaked, input-dependent
// distributions: greedy paths without near-ties, real EOS stops.
import type { Engine } from '../../engine/index.ts';
import type { DecoderConfig } from '../../models/hf-config.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { initialParameters } from '../../models/init.ts';
import type { PolicyWeights } from '../../ppo/generation/types.ts';

export function randomPolicy(engine: Engine, config: DecoderConfig, seed = 5): PolicyWeights {
  const params = createParameterArena(engine, config, `random-policy-${config.architecture}-${seed}`);
  uploadArenaTensors(engine, params, initialParameters(config, seed, 0.35));
  return { config, params };
}
