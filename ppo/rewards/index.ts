// Rule rewards chosen by data_source, as verl's default_compute_score, and the shape every reward function
// (rule, custom module) returns. A response's reward is a number; a function may return {score, ...extra}, which
// validation reports entry by entry (score included) as verl's reward_extra_info (math_dapo's acc and pred).
import * as arithmetic from './arithmetic.ts';
import * as gsm8k from './gsm8k.ts';
import * as math from './math.ts';
import * as mathDapo from './math-dapo.ts';
import * as qaEm from './qa-em.ts';

export type RewardResult = number | boolean | { score: number; [extra: string]: unknown };

/** verl's compute_score signature: (data_source, solution_str, ground_truth, extra_info). */
export type RewardFunction = (
  dataSource: string,
  solutionStr: string,
  groundTruth: unknown,
  extraInfo: Record<string, unknown> | null,
) => RewardResult | Promise<RewardResult>;

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
    if (typeof score !== 'number' || !Number.isFinite(score))
      throw new Error(`${where} returned ${describeReturned(result)}; score must be a finite number`);
    return { score, rewardExtraInfo: { ...result } };
  }
  throw new Error(`${where} returned ${describeReturned(result)}; expected a number or {score, ...}`);
}

/** What a reward function returned, as JSON (a string score keeps its quotes); NaN and Infinity, which JSON cannot
 *  show, and values it cannot encode, as JavaScript writes them. */
function describeReturned(result: unknown): string {
  const nonJson = (_key: string, value: unknown) =>
    typeof value === 'number' && !Number.isFinite(value) ? `__${value}__` : value;
  try {
    return (JSON.stringify(result, nonJson) ?? String(result)).replace(/"__(NaN|-?Infinity)__"/g, '$1');
  } catch {
    return String(result);
  }
}

function stringTruth(dataSource: string, groundTruth: unknown): string {
  if (typeof groundTruth !== 'string')
    throw new Error(
      `reward for data_source "${dataSource}": reward_model.ground_truth must be a string, got ` +
        `${JSON.stringify(groundTruth)}`,
    );
  return groundTruth;
}

/** Search-R1 stores {target: [answers]}; a bare answer or list is accepted too. */
function goldenAnswers(dataSource: string, groundTruth: unknown): qaEm.GoldenAnswers {
  const target =
    groundTruth !== null && typeof groundTruth === 'object' && !Array.isArray(groundTruth)
      ? (groundTruth as { target?: unknown }).target
      : groundTruth;
  const valid = typeof target === 'string' || (Array.isArray(target) && target.every((t) => typeof t === 'string'));
  if (!valid)
    throw new Error(
      `reward for data_source "${dataSource}": reward_model.ground_truth must be {target: [answers]}, got ` +
        `${JSON.stringify(groundTruth)}`,
    );
  return target as qaEm.GoldenAnswers;
}

const QA_DATASETS = ['nq', 'triviaqa', 'popqa', 'hotpotqa', '2wikimultihopqa', 'musique', 'bamboogle'];

type RuleReward = (dataSource: string, solution: string, groundTruth: unknown) => RewardResult;

const gsm8kReward: RuleReward = (source, solution, truth) => gsm8k.computeScore(solution, stringTruth(source, truth));
const mathReward: RuleReward = (source, solution, truth) => math.computeScore(solution, stringTruth(source, truth));
const mathDapoReward: RuleReward = (source, solution, truth) =>
  mathDapo.computeScore(solution, stringTruth(source, truth));
const qaReward: RuleReward = (source, solution, truth) =>
  qaEm.computeScore(solution, { target: goldenAnswers(source, truth) });
const qaSubemReward: RuleReward = (source, solution, truth) =>
  qaEm.computeScoreSubem(solution, { target: goldenAnswers(source, truth) });
const arithmeticReward: RuleReward = (source, solution, truth) =>
  arithmetic.computeScore(solution, stringTruth(source, truth));

/** data_source → rule: verl's names, plus Search-R1's own dataset names and the built-in tasks. */
const RULES = new Map<string, RuleReward>([
  ['openai/gsm8k', gsm8kReward],
  ['lighteval/MATH', mathReward],
  ['DigitalLearningGmbH/MATH-lighteval', mathReward],
  ['HuggingFaceH4/MATH-500', mathReward],
  ['math_dapo', mathDapoReward],
  ['math', mathDapoReward],
  ['math_dapo_reasoning', mathDapoReward],
  ...QA_DATASETS.flatMap((name): [string, RuleReward][] => [
    [`searchR1_${name}`, qaReward],
    [name, qaReward],
  ]),
  ['arithmetic', arithmeticReward],
  ['synthetic_qa', qaReward],
]);

export const RULE_DATA_SOURCES: readonly string[] = [...RULES.keys()];

/** verl scores AIME validation sets (aime24, aime_2025, …) with math_dapo: any data_source with this prefix. */
const AIME_PREFIX = 'aime';
/** Search-R1 evaluates with substring EM under names like nq_subem; any data_source with this suffix gets it. */
const SUBEM_SUFFIX = '_subem';

/** The rule for a data_source: the exact names, then verl's aime prefix, then this engine's _subem suffix. */
function ruleFor(dataSource: string): RuleReward | undefined {
  if (RULES.has(dataSource)) return RULES.get(dataSource);
  if (dataSource.startsWith(AIME_PREFIX)) return mathDapoReward;
  return dataSource.endsWith(SUBEM_SUFFIX) ? qaSubemReward : undefined;
}

/** verl's default_compute_score: a number, or math_dapo's {score, acc, pred}. extra_info is part of the signature
 *  (custom functions use it); these rules ignore it. */
export function computeScore(
  dataSource: string,
  solutionStr: string,
  groundTruth: unknown,
  _extraInfo: Record<string, unknown> | null = null,
): RewardResult {
  const rule = ruleFor(dataSource);
  if (!rule) {
    throw new Error(
      `no rule reward for data_source "${dataSource}" (known: ${RULE_DATA_SOURCES.join(', ')}, any name starting ` +
        `with ${AIME_PREFIX}, ` +
        `and any name ending in ${SUBEM_SUFFIX}); ` +
        'set custom_reward_function.path to a module with your own compute_score, or reward_model.enable=true',
    );
  }
  return rule(dataSource, solutionStr, groundTruth);
}
