import { describe, it, expect } from 'vitest';
import * as rlla from '../../ppo/rewards/rlla.ts';
import { builtinRewardModule } from '../../ppo/rewards/custom-reward-node.ts';

// Recorded by running verl-project/verl 1dda039b's verl/utils/reward_score/rlla.py (the mirror's file, unchanged)
// under Python 3: compute_score('rlla', solution_str, ground_truth, {'experiment_name': name}). verl's own sample
// (fixture sample-verl_1dda039b.json, test/webgpu/ppo-verl-cases.test.ts) has seven more.
const CASES: [string, string, string, rlla.RllaResult][] = [
  // Python's ==: 1.0 and true equal 1
  [
    '<|im_start|>assistant\n<think>a</think>\n<tool_call>\n{"name": "f", "parameters": {"x": 1.0, "y": true}}\n</tool_call><|im_end|>',
    '<tool_call>\n{"name": "f", "parameters": {"x": 1, "y": 1}}\n</tool_call>',
    'qwen-run',
    { score: 4.0, format_reward: 1.0, accuracy_reward: 3.0 },
  ],
  // llama template; the best unused call of a name, a missing one
  [
    '<|start_header_id|>assistant<|end_header_id|>\n<think>a</think>\n<tool_call>\n{"name": "f", "parameters": {"x": 2}}\n{"name": "f", "parameters": {"x": 1, "z": 0}}\n</tool_call><|eot_id|>',
    '<tool_call>\n{"name": "f", "parameters": {"x": 1}}\n{"name": "g", "parameters": {}}\n</tool_call>',
    'llama-8b',
    { score: 0.75, format_reward: 1.0, accuracy_reward: -0.25 },
  ],
  // a trailing newline is stripped; no call in the ground truth: accuracy 0
  [
    '<think>x</think>\n<response>hi</response>\n',
    '<response>hi</response>',
    'qwen-run',
    { score: 1.0, format_reward: 1.0, accuracy_reward: 0.0 },
  ],
  // a call that is not a dict: the minimum
  [
    '<think>x</think>\n<tool_call>\n[1, 2]\n</tool_call>',
    '<tool_call>\n{"name": "f", "parameters": {"x": 1}}\n</tool_call>',
    'qwen-run',
    { score: -2.0, format_reward: 1.0, accuracy_reward: -3.0 },
  ],
  // two <response> tags: format 0
  [
    '<think>x</think>\n<tool_call>\n{"name": "f", "parameters": {"x": 1}}\n</tool_call>\n<response>a</response><response>b</response>',
    '<tool_call>\n{"name": "f", "parameters": {"x": 1}}\n</tool_call>\n<response>a</response>',
    'qwen-run',
    { score: 3.0, format_reward: 0.0, accuracy_reward: 3.0 },
  ],
  // no <think>: format 0
  ['no think at all', 'plain answer', 'qwen-run', { score: 0.0, format_reward: 0.0, accuracy_reward: 0.0 }],
];

describe("rlla reward (verl 1dda039b's GDPO tool-use reward)", () => {
  it.each(CASES)('%j vs %j (%s)', (solution, truth, experiment, expected) => {
    expect(rlla.computeScore(solution, truth, { experiment_name: experiment })).toEqual(expected);
  });

  it('raises where verl does: an unknown chat template, a ground truth that is not JSON', () => {
    expect(() => rlla.computeScore('x', 'y', { experiment_name: 'mistral' })).toThrow('Unknown model name: mistral');
    expect(() => rlla.computeScore('x', '<tool_call>\nnot json\n</tool_call>', { experiment_name: 'qwen' })).toThrow(
      /ground truth's <tool_call> lines are not JSON/,
    );
  });

  it("runs for verl's module path, as the GDPO example names it", () => {
    const reward = builtinRewardModule('/opt/verl/verl/utils/reward_score/rlla.py');
    expect(reward).not.toBeNull();
    expect(reward!('rlla', CASES[0][0], CASES[0][1], { experiment_name: 'qwen' })).toEqual(CASES[0][3]);
    expect(builtinRewardModule('my_reward.py')).toBeNull();
  });
});
