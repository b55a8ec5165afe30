// `node tools/bench.js memory --model DIR [--memory-gb N] [key=value ...]`: the memory plan of a PPO run on this device
// (or on one of N GiB) for the checkpoint in DIR, read from its config.json alone — no weights are loaded, nothing
// runs. Overrides are the trainer's (verl keys, defaults as verl's); the critic is the same trunk with a value head
// unless critic.model.path names another directory.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Engine } from '../../engine/index.ts';
import { formatGib } from '../../engine/device-memory.ts';
import { parseHfConfig, withHead, type DecoderConfig } from '../../models/hf-config.ts';
import { ConfigError, loadConfig, usesCritic, type PpoConfig } from '../../ppo/config.ts';
import { planMemory, formatMemoryPlan, deviceMemory, type MemoryPlan } from '../../ppo/jobs/memory-plan.ts';

async function readModelConfig(dir: string): Promise<DecoderConfig> {
  const file = join(dir, 'config.json');
  return parseHfConfig(await readFile(file, 'utf8'), file);
}

export async function memoryPlanOfCheckpoint(
  engine: Engine,
  argv: string[],
): Promise<{ plan: MemoryPlan; lines: string[] } | string> {
  const modelAt = argv.indexOf('--model');
  const gbAt = argv.indexOf('--memory-gb');
  if (modelAt < 0 || !argv[modelAt + 1])
    return 'usage: node tools/bench.js memory --model DIR [--memory-gb N] [key=value ...]';
  const dir = argv[modelAt + 1];
  const overrides = argv.filter((a, i) => !a.startsWith('--') && i !== modelAt + 1 && i !== gbAt + 1 && a !== 'memory');
  let config: PpoConfig;
  let actor: DecoderConfig;
  // A bad key or model directory is bad input: one line and exit 2, as the usage line, not a stack trace.
  try {
    config = loadConfig({ overrides: [`actor_rollout_ref.model.path=${dir}`, ...overrides] });
    actor = await readModelConfig(dir);
  } catch (err) {
    if (err instanceof ConfigError) return `configuration error: ${err.problems.join('; ')}`;
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return `--model ${dir}: no config.json there`;
    throw err;
  }
  const criticPath = config.critic.model.path;
  const critic = !usesCritic(config)
    ? null
    : criticPath === null || criticPath === dir
      ? withHead(actor, 'token-classification')
      : await readModelConfig(criticPath).then((c) =>
          c.head === 'causal-lm' ? withHead(c, 'token-classification') : c,
        );
  const rewardModel = config.reward_model.enable ? await readModelConfig(config.reward_model.model.path!) : null;
  const gib = Number(argv[gbAt + 1]);
  if (gbAt >= 0 && !(gib > 0)) return `--memory-gb: "${argv[gbAt + 1] ?? ''}" must be a positive number of GiB`;
  const memory =
    gbAt >= 0
      ? {
          bytes: gib * 2 ** 30,
          source: 'override' as const,
          label: `--memory-gb ${gib}: ${formatGib(gib * 2 ** 30)} (override)`,
        }
      : engine.memory;
  const plan = planMemory(config, { actor, critic, rewardModel }, deviceMemory(engine, memory));
  return {
    plan,
    lines: [
      `${dir}: ${actor.architecture}, ${actor.numLayers} layers, hidden ${actor.hiddenSize}, vocab ${actor.vocabSize}`,
      ...formatMemoryPlan(plan),
    ],
  };
}
