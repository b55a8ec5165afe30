// The policy-loss table (kernels/ppo/policy-loss-modes.ts) and the estimator table
// (ppo/config/advantage-estimator-table.ts) are what the kernel, the checks, --help and the harness derive from:
// every loss must reach the shader's switch under its own constant, and the derived lists follow the tables.
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  POLICY_LOSS_MODES,
  POLICY_LOSS_TABLE,
  policyLossMetrics,
  policyLossModeConstants,
} from '../../kernels/ppo/policy-loss-modes.ts';
import { resolvePolicyLossConfig } from '../../ppo/algorithm/policy-loss-config.ts';
import { formatHelp, loadConfig, usesCritic } from '../../ppo/config.ts';
import { planStep } from '../../ppo/step-plan.ts';
import {
  ADV_ESTIMATOR_TABLE,
  ADV_ESTIMATORS,
  SUM_PI_SQUARED_ESTIMATORS,
  estimatorUsesCritic,
} from '../../ppo/config/advantage-estimator-table.ts';
import { ADVANTAGE_COMPUTE, computeAdvantagesGpu } from '../../ppo/algorithm/advantage-estimators.ts';

const wgsl = readFileSync(fileURLToPath(new URL('../../kernels/ppo/policy-loss.wgsl', import.meta.url)), 'utf8');

describe('policy losses declared as data', () => {
  it('gives each mode its own code and a case of the kernel switch', () => {
    const codes = POLICY_LOSS_TABLE.map((m) => m.code);
    expect(new Set(codes).size).toBe(codes.length);
    for (const { name } of POLICY_LOSS_TABLE)
      expect(wgsl, name).toMatch(new RegExp(`case [^:{]*LOSS_MODE_${name.toUpperCase()}\\b`));
    expect(wgsl).not.toMatch(/case \d+u/);
    expect(policyLossModeConstants()).toContain('const LOSS_MODE_DRO: u32 = 10u;');
  });

  it("derives the config's choices, --help, the checks and the harness's metric keys", () => {
    expect(POLICY_LOSS_MODES).toEqual(POLICY_LOSS_TABLE.map((m) => m.name));
    const help = formatHelp();
    for (const { name, help: line } of POLICY_LOSS_TABLE) expect(help).toContain(`${name} (${line})`);
    expect(() => resolvePolicyLossConfig({ lossMode: 'dro' })).toThrow('policy_loss.dro_beta must be a positive value');
    expect(() => resolvePolicyLossConfig({ lossMode: 'vanilla', clipRatioC: 1 })).toThrow(/dual-clip PPO/);
    expect(resolvePolicyLossConfig({ lossMode: 'dro', droBeta: 0.1 }).droBeta).toBe(0.1);
    expect(policyLossMetrics('dro')).toEqual(['actor/ppo_kl']);
    expect(policyLossMetrics('dppo_tv')).toEqual(['actor/pg_clipfrac', 'actor/ppo_kl', 'actor/pg_clipfrac_lower']);
  });
});

describe('advantage estimators declared as data', () => {
  it('dispatches by lookup: every table name has one compute function, and nothing else has one', () => {
    expect(Object.keys(ADVANTAGE_COMPUTE).sort()).toEqual([...ADV_ESTIMATORS].sort());
    for (const name of ADV_ESTIMATORS) expect(typeof ADVANTAGE_COMPUTE[name], name).toBe('function');
    // A name outside the table (or an Object.prototype key) is refused before any tensor is touched.
    for (const name of ['gdpo_v2', 'toString'])
      expect(() => computeAdvantagesGpu(null as never, name, null as never)).toThrow(
        `algorithm.adv_estimator: unknown estimator "${name}" (expected one of gae, grpo,`,
      );
  });

  it("derives the config's choices, --help, the critic, ReMax's baseline and Σπ²", () => {
    expect(ADV_ESTIMATORS).toEqual(ADV_ESTIMATOR_TABLE.map((e) => e.name));
    expect(ADV_ESTIMATORS.filter(estimatorUsesCritic)).toEqual(['gae']);
    expect(SUM_PI_SQUARED_ESTIMATORS).toEqual(['optimal_token_baseline', 'tir_optimal_token_baseline']);
    const help = formatHelp();
    for (const { name, help: line } of ADV_ESTIMATOR_TABLE) expect(help).toContain(`${name} (${line})`);
    const plan = (estimator: string) =>
      planStep(loadConfig({ overrides: [`algorithm.adv_estimator=${estimator}`, 'actor_rollout_ref.rollout.n=2'] }));
    expect(plan('remax').remaxBaseline).toBe(true);
    expect(plan('gdpo').remaxBaseline).toBe(false);
    expect(
      usesCritic(loadConfig({ overrides: ['algorithm.adv_estimator=gdpo', 'actor_rollout_ref.rollout.n=2'] })),
    ).toBe(false);
  });
});
