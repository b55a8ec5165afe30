// custom_reward_function.{path,name}: a reward function from the user's JS/TS module (Node: TypeScript loads
// through the project's loader), called as verl calls it: (data_source, solution_str, ground_truth, extra_info).
// A call that throws is reported with the data_source, ground truth and response it was scoring; a call that
// does not settle within custom_reward_function.timeout seconds stops the run instead of hanging it.
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { RewardFunction, RewardResult } from './index.ts';

const EXCERPT_CHARS = 80;

function excerpt(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > EXCERPT_CHARS ? `${text.slice(0, EXCERPT_CHARS)}…` : text;
}

/** Wraps a reward function: errors and timeouts name the function and the response it was scoring. */
export function guardedRewardFunction(fn: RewardFunction, where: string, timeoutSeconds: number): RewardFunction {
  return async (dataSource, solutionStr, groundTruth, extraInfo) => {
    const call = `${where} (data_source "${dataSource}", ground_truth ${excerpt(groundTruth)}` +
      `${extraInfo && 'index' in extraInfo ? `, extra_info.index ${excerpt(extraInfo.index)}` : ''}, response ${excerpt(solutionStr)})`;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${call} did not return within custom_reward_function.timeout=${timeoutSeconds} s`)), timeoutSeconds * 1000);
    });
    try {
      return await Promise.race([Promise.resolve().then(() => fn(dataSource, solutionStr, groundTruth, extraInfo)), timeout]) as RewardResult;
    } catch (err) {
      if (err instanceof Error && err.message.startsWith(call)) throw err;
      throw new Error(`${call} threw: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    } finally {
      clearTimeout(timer);
    }
  };
}

export async function loadCustomRewardFunction(config: { path: string; name: string; timeout: number }): Promise<RewardFunction> {
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
  return guardedRewardFunction(fn as RewardFunction, `custom_reward_function ${config.name} of ${file}`, config.timeout);
}
