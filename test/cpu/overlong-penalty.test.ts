// DAPO's overlong penalty against verl's reward_manager/dapo.py (lines 116-122 at b178a3cd):
// expected_len = max_resp_len − len; overlong_reward = min(−(length − expected_len) / len × penalty_factor, 0).
import { describe, it, expect } from 'vitest';
import { loadConfig } from '../../ppo/config.ts';
import { overlongPenalty } from '../../ppo/rewards/overlong-penalty.ts';

describe('overlong penalty (reward_model.reward_manager=dapo)', () => {
  const dapo = loadConfig({
    overrides: [
      'data.max_response_length=8',
      'reward_model.reward_manager=dapo',
      '+reward_model.reward_kwargs.overlong_buffer_cfg.enable=True',
      '+reward_model.reward_kwargs.overlong_buffer_cfg.len=4',
      '+reward_model.reward_kwargs.overlong_buffer_cfg.penalty_factor=1.0',
    ],
  });

  it('grows linearly through the buffer before max_resp_len', () => {
    expect([0, 4, 5, 6, 8].map((length) => overlongPenalty(length, dapo))).toEqual([0, 0, -0.25, -0.5, -1]);
  });

  it('counts from reward_kwargs.max_resp_len when given, and is off for naive or without the buffer', () => {
    const longer = loadConfig({
      overrides: [
        'data.max_response_length=8',
        'reward_model.reward_manager=dapo',
        'reward_model.reward_kwargs={max_resp_len: 16, overlong_buffer_cfg: {enable: true, len: 8, penalty_factor: 2}}',
      ],
    });
    expect(overlongPenalty(12, longer)).toBe(-1);
    expect(
      overlongPenalty(8, loadConfig({ overrides: ['data.max_response_length=8', 'reward_model.reward_manager=dapo'] })),
    ).toBe(0);
    expect(overlongPenalty(8, loadConfig())).toBe(0);
  });
});
