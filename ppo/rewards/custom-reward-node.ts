// custom_reward_function.{path,name}: a reward function from the user's JS/TS module (Node: TypeScript loads
// through the project's loader), called as verl calls it: (data_source, solution_str, ground_truth, extra_info).
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { RewardFunction } from './index.ts';

export async function loadCustomRewardFunction(config: { path: string; name: string }): Promise<RewardFunction> {
  const file = resolve(config.path.replace(/^~(?=$|\/)/, homedir()));
  if (!existsSync(file)) throw new Error(`custom_reward_function.path: ${file} does not exist`);
  let module: Record<string, unknown>;
  try {
    module = await import(pathToFileURL(file).href);
  } catch (err) {
    throw new Error(`custom_reward_function.path: cannot load ${file}: ${(err as Error).message}`);
  }
  const fn = module[config.name];
  if (typeof fn !== 'function') {
    const exported = Object.keys(module).filter((k) => typeof module[k] === 'function');
    throw new Error(`custom_reward_function.name: ${file} exports no function "${config.name}"` +
      (exported.length > 0 ? ` (its functions: ${exported.join(', ')}) — set custom_reward_function.name` : ''));
  }
  return fn as RewardFunction;
}
