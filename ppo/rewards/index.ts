// Rule rewards chosen by data_source, as verl's default_compute_score, and the shape every reward function
// (rule, custom module) returns. A response's reward is a number; a function may return {score, ...extra}, which
// validation reports entry by entry (score included) as verl's reward_extra_info.
import * as arithmetic from './arithmetic.ts';
import * as gsm8k from './gsm8k.ts';
import * as math from './math.ts';
import * as qaEm from './qa-em.ts';

export type RewardResult = number | boolean | { score: number; [extra: string]: unknown };

/** verl's compute_score signature: (data_source, solution_str, ground_truth, extra_info). */
export type RewardFunction = (dataSource: string, solutionStr: string, groundTruth: unknown, extraInfo: Record<string, unknown> | null) => RewardResult | Promise<RewardResult>;

/** The arguments of one call of a reward function, by their verl names. */
export interface RewardCall {
  dataSource: string;
  solutionStr: string;
  groundTruth: unknown;
  extraInfo: Record<string, unknown> | null;
}

export interface RewardScore {
  score: number;
  /** A dict result's entries, score included (verl's reward_extra_info of the response); null for a plain number. */
  rewardExtraInfo: Record<string, unknown> | null;
}

/** Checks what a reward function returned and takes its score; `where` names the function for the error. */
export function toRewardScore(result: unknown, where: string): RewardScore {
  if (typeof result === 'boolean') return { score: result ? 1 : 0, rewardExtraInfo: null };
  if (typeof result === 'number') {
    if (!Number.isFinite(result)) throw new Error(`${where} returned ${result}; a reward must be a finite number`);
    return { score: result, rewardExtraInfo: null };
  }
  if (result !== null && typeof result === 'object' && 'score' in result) {
    const { score } = result as { score: unknown };
    if (typeof score !== 'number' || !Number.isFinite(score)) throw new Error(`${where} returned ${describeReturned(result)}; score must be a finite number`);
    return { score, rewardExtraInfo: { ...result } };
  }
  throw new Error(`${where} returned ${describeReturned(result)}; expected a number or {score, ...}`);
}

/** What a reward function returned, as JSON (a string score keeps its quotes); NaN and Infinity, which JSON cannot
 *  show, and values it cannot encode, as JavaScript writes them. */
function describeReturned(result: unknown): string {
  const nonJson = (_key: string, value: unknown) => typeof value === 'number' && !Number.isFinite(value) ? `__${value}__` : value;
  try {
    return (JSON.stringify(result, nonJson) ?? String(result)).replace(/"__(NaN|-?Infinity)__"/g, '$1');
  } catch {
    return String(result);
  }
}

function stringTruth(dataSource: string, groundTruth: unknown): string {
  if (typeof groundTruth !== 'string') throw new Error(`reward for data_source "${dataSource}": reward_model.ground_truth must be a string, got ${JSON.stringify(groundTruth)}`);
  return groundTruth;
}

/** Search-R1 stores {target: [answers]}; a bare answer or list is accepted too. */
function goldenAnswers(dataSource: string, groundTruth: unknown): qaEm.GoldenAnswers {
  const target = groundTruth !== null && typeof groundTruth === 'object' && !Array.isArray(groundTruth) ? (groundTruth as { target?: unknown }).target : groundTruth;
  const valid = typeof target === 'string' || (Array.isArray(target) && target.every((t) => typeof t === 'string'));
  if (!valid) throw new Error(`reward for data_source "${dataSource}": reward_model.ground_truth must be {target: [answers]}, got ${JSON.stringify(groundTruth)}`);
  return target as qaEm.GoldenAnswers;
}

const QA_DATASETS = ['nq', 'triviaqa', 'popqa', 'hotpotqa', '2wikimultihopqa', 'musique', 'bamboogle'];

type RuleReward = (dataSource: string, solution: string, groundTruth: unknown) => number;

const gsm8kReward: RuleReward = (source, solution, truth) => gsm8k.computeScore(solution, stringTruth(source, truth));
const mathReward: RuleReward = (source, solution, truth) => math.computeScore(solution, stringTruth(source, truth));
const qaReward: RuleReward = (source, solution, truth) => qaEm.computeScore(solution, { target: goldenAnswers(source, truth) });
const qaSubemReward: RuleReward = (source, solution, truth) => qaEm.computeScoreSubem(solution, { target: goldenAnswers(source, truth) });
const arithmeticReward: RuleReward = (source, solution, truth) => arithmetic.computeScore(solution, stringTruth(source, truth));

/** data_source → rule: verl's names, plus Search-R1's own dataset names and the built-in tasks. */
const RULES = new Map<string, RuleReward>([
  ['openai/gsm8k', gsm8kReward],
  ['lighteval/MATH', mathReward],
  ['DigitalLearningGmbH/MATH-lighteval', mathReward],
  ['HuggingFaceH4/MATH-500', mathReward],
  ...QA_DATASETS.flatMap((name): [string, RuleReward][] => [[`searchR1_${name}`, qaReward], [name, qaReward]]),
  ['arithmetic', arithmeticReward],
  ['synthetic_qa', qaReward],
]);

export const RULE_DATA_SOURCES: readonly string[] = [...RULES.keys()];

/** Search-R1 evaluates with substring EM under names like nq_subem; any data_source with this suffix gets it. */
const SUBEM_SUFFIX = '_subem';

/** verl's default_compute_score; extra_info is part of the signature (custom functions use it), these rules ignore it. */
export function computeScore(dataSource: string, solutionStr: string, groundTruth: unknown, extraInfo: Record<string, unknown> | null = null): number {
  const rule = RULES.get(dataSource) ?? (dataSource.endsWith(SUBEM_SUFFIX) ? qaSubemReward : undefined);
  if (!rule) {
    throw new Error(`no rule reward for data_source "${dataSource}" (known: ${RULE_DATA_SOURCES.join(', ')}, and any name ending in ${SUBEM_SUFFIX}); ` +
      'set custom_reward_function.path to a module with your own compute_score, or reward_model.enable=true');
  }
  return rule(dataSource, solutionStr, groundTruth);
}
