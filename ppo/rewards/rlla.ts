// verl's rlla reward (verl/utils/reward_score/rlla.py at 1dda039b, the tool-use reward of its GDPO example): a
// format reward in {0, 1} (the response's shape against the ground truth's: <think>, then <tool_call> lines and/or
// <response>) and a tool-call accuracy reward in [−3, 3] (names and parameter keys matched as multisets, parameter
// values compared with Python's ==), returned as {score: their sum, format_reward, accuracy_reward} so GDPO can
// normalise each (algorithm.gdpo_reward_keys). Not in default_compute_score: verl's example names it as
// reward.custom_reward_function.path=<verl>/verl/utils/reward_score/rlla.py.
import { PY_STRIP } from './math-dapo.ts';

export interface RllaResult {
  score: number;
  format_reward: number;
  accuracy_reward: number;
  [extra: string]: unknown;
}

const TOOL_MAX = 3.0;
const TOOL_MIN = -3.0;
const FORMAT_MAX = 1.0;
const FORMAT_MIN = 0.0;

const strip = (s: string) => s.replace(PY_STRIP, '');
const count = (s: string, part: string) => s.split(part).length - 1;

/** Python's ==: 1 == 1.0 == True, dicts by their key sets, lists element by element. */
function pyEqual(a: unknown, b: unknown): boolean {
  const numeric = (v: unknown) => typeof v === 'number' || typeof v === 'boolean';
  if (numeric(a) && numeric(b)) return Number(a) === Number(b);
  if (Array.isArray(a) || Array.isArray(b))
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => pyEqual(x, b[i]));
  if (isDict(a) && isDict(b)) {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((k) => k in b && pyEqual(a[k], b[k]));
  }
  return a === b;
}

function isDict(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Python's d[key] on a parsed JSON value: a TypeError or KeyError unless `d` is a dict holding `key`. */
function item(d: unknown, key: string): unknown {
  if (!isDict(d) || !(key in d)) throw new Error(`rlla: no "${key}" in ${JSON.stringify(d)}`);
  return d[key];
}

/** Hashable identity as Python's Counter sees it: 1, 1.0 and True are one key. */
function hashKey(v: unknown): string {
  return typeof v === 'number' || typeof v === 'boolean' ? `n:${Number(v)}` : `${typeof v}:${JSON.stringify(v)}`;
}

/** rlla.match_score: multiset intersection over union of the two lists, 1 when equal, 0 when either is empty. */
export function matchScore(list1: readonly unknown[], list2: readonly unknown[]): number {
  if (pyEqual(list1, list2)) return 1.0;
  if (list1.length === 0 || list2.length === 0) return 0.0;
  const counter = (list: readonly unknown[]) => {
    const c = new Map<string, number>();
    for (const v of list) c.set(hashKey(v), (c.get(hashKey(v)) ?? 0) + 1);
    return c;
  };
  const c1 = counter(list1);
  const c2 = counter(list2);
  let intersection = 0;
  for (const [k, n] of c1) if (c2.has(k)) intersection += Math.min(n, c2.get(k)!);
  const maxPossible = list1.length + list2.length - intersection;
  return maxPossible > 0 ? intersection / maxPossible : 0.0;
}

/** rlla.customize_format_reward_func for one response: the regex the ground truth's shape picks. Python's `$`
 *  (no MULTILINE) also matches before a final newline, hence (?=\n?$). */
export function formatReward(response: string, answer: string): number {
  const hasResponse = answer.includes('<response>');
  const hasToolCall = answer.includes('<tool_call>');
  const once = (...tags: string[]) => tags.every((tag) => count(response, tag) === 1);
  let ok: boolean;
  if (hasResponse && !hasToolCall) {
    ok = /^<think>.*?<\/think>\n<response>.*?<\/response>(?=\n?$)/s.test(response) && once('<response>', '</response>');
  } else if (!hasResponse && hasToolCall) {
    ok =
      /^<think>.*?<\/think>\n<tool_call>\n.*?\n<\/tool_call>(?=\n?$)/s.test(response) &&
      once('<tool_call>', '</tool_call>');
  } else if (hasResponse && hasToolCall) {
    ok =
      /^<think>.*?<\/think>\n<tool_call>\n.*?\n<\/tool_call>\n<response>.*?<\/response>(?=\n?$)/s.test(response) &&
      once('<tool_call>', '</tool_call>', '<response>', '</response>');
  } else {
    ok = /^<think>.*?<\/think>(?=\n?$)/s.test(response);
  }
  return ok ? FORMAT_MAX : FORMAT_MIN;
}

/** rlla.compute_tool_call_reward: names matched as multisets, then each ground-truth call's best unused prediction
 *  of its name (parameter keys matched, equal values counted), scaled to [min, max]. Throws where Python would. */
function toolCallReward(gtTools: readonly unknown[], pdTools: readonly unknown[]): number {
  if (pyEqual(gtTools, pdTools)) return TOOL_MAX;
  const gtNames = gtTools.map((tool) => item(tool, 'name'));
  const pdNames = pdTools.map((tool) => item(tool, 'name'));
  let score = matchScore(gtNames, pdNames);
  let localMaxPossible = 1.0;
  const used = new Set<number>();
  for (const gtTool of gtTools) {
    const gtName = item(gtTool, 'name');
    const gtParams = item(gtTool, 'parameters');
    if (!isDict(gtParams)) throw new Error('rlla: ground-truth parameters are not a dict');
    localMaxPossible += 1.0 + Object.keys(gtParams).length;
    let bestScore = 0.0;
    let bestIndex = -1;
    pdTools.forEach((pdTool, i) => {
      if (used.has(i) || !pyEqual(item(pdTool, 'name'), gtName)) return;
      const pdParams = item(pdTool, 'parameters');
      if (!isDict(pdParams)) throw new Error('rlla: predicted parameters are not a dict');
      const paramScore = matchScore(Object.keys(gtParams), Object.keys(pdParams));
      let correctness = 0;
      for (const [k, v] of Object.entries(gtParams)) if (k in pdParams && pyEqual(pdParams[k], v)) correctness += 1.0;
      const total = paramScore + correctness;
      if (total > bestScore) {
        bestScore = total;
        bestIndex = i;
      }
    });
    if (bestIndex >= 0) {
      used.add(bestIndex);
      score += bestScore;
    }
  }
  return ((TOOL_MAX - TOOL_MIN) * score) / localMaxPossible + TOOL_MIN;
}

/** The JSON lines between the first <tool_call> and the next </tool_call>. */
function toolLines(text: string): unknown[] {
  return strip(text.split('<tool_call>')[1].split('</tool_call>')[0])
    .split('\n')
    .map((line) => JSON.parse(line));
}

/** rlla.customize_correctness_reward_tool for one response: 0 without a ground-truth call, the minimum when the
 *  response's calls are missing or malformed. A ground truth that is not JSON raises, as in verl. */
export function accuracyReward(response: string, answer: string): number {
  if (!answer.includes('<tool_call>')) return 0.0;
  let gtTools: unknown[];
  try {
    gtTools = toolLines(answer);
  } catch (error) {
    throw new Error(`rlla: the ground truth's <tool_call> lines are not JSON (${(error as Error).message})`);
  }
  try {
    if (!response.includes('<tool_call>') || !response.includes('</tool_call>')) return TOOL_MIN;
    return toolCallReward(gtTools, toolLines(response));
  } catch {
    return TOOL_MIN;
  }
}

/** rlla.compute_score: the assistant turn cut out by the chat template extra_info.experiment_name names (llama or
 *  qwen), scored for format and tool-call accuracy. */
export function computeScore(
  solutionStr: string,
  groundTruth: string,
  extraInfo: Readonly<Record<string, unknown>> | null,
): RllaResult {
  const experiment = String(extraInfo?.experiment_name ?? '');
  let predict: string;
  if (experiment.includes('llama')) {
    predict = strip(solutionStr.split('<|start_header_id|>assistant<|end_header_id|>').at(-1)!.split('<|eot_id|>')[0]);
  } else if (experiment.includes('qwen')) {
    predict = strip(solutionStr.split('<|im_start|>assistant').at(-1)!.split('<|im_end|>')[0]);
  } else {
    throw new Error(
      `rlla: Unknown model name: ${experiment} (extra_info.experiment_name, i.e. trainer.experiment_name, must ` +
        'contain llama or qwen to pick the chat template)',
    );
  }
  const format = formatReward(predict, groundTruth);
  const accuracy = accuracyReward(predict, groundTruth);
  return { score: format + accuracy, format_reward: format, accuracy_reward: accuracy };
}
