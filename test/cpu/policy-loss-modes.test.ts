// Each verl loss_mode reaches the policy-loss kernel's branch of the same name: the key is composed as a user types
// it, the step plan resolves it, and the launcher's lossMode uniform must equal the shader's LOSS_MODE_<MODE>
// constant, whose switch case holds that mode's math (test/webgpu/ppo-kernels.test.ts checks each case against the
// float64 reference). A recording engine stands in for the device, so this runs in milliseconds.
import { describe, it, expect } from 'vitest';
import type { Engine, KernelSpec, Tensor } from '../../engine/index.ts';
import { computeActorLossGpu, policyLossSpec, type ActorLossExtras } from '../../kernels/ppo/policy-loss.ts';
import { composeConfig } from '../../ppo/config.ts';
import { planStep } from '../../ppo/step-plan.ts';

// verl-project/verl 1dda039b, core_algos.py: every @register_policy_loss name but bypass_mode, which verl reaches
// through algorithm.rollout_correction (below); b178a3cd had all but dppo_tv, dppo_kl and dro.
const VERL_LOSS_MODES = [
  'vanilla',
  'gspo',
  'sapo',
  'gpg',
  'clip_cov',
  'kl_cov',
  'geo_mean',
  'cispo',
  'dppo_tv',
  'dppo_kl',
  'dro',
];

const B = 2;
const T = 3;

/** The lossMode uniform the launcher sends for the actor config the step plan resolved from `overrides`. */
function dispatchedLossMode(overrides: string[]): number {
  const { config } = composeConfig({ overrides });
  const policyLoss = planStep(config).actor.policyLoss;
  const dispatches: { spec: KernelSpec; uniforms: Record<string, number> }[] = [];
  const engine = {
    caps: { minStorageBufferOffsetAlignment: 256 },
    dispatch: (spec: KernelSpec, args: { uniforms: Record<string, number> }) =>
      dispatches.push({ spec, uniforms: args.uniforms }),
  } as unknown as Engine;
  const tensor = (name: string, size: number) => ({ name, size, shape: [size] }) as unknown as Tensor;
  const rows = (name: string) => tensor(name, B * T);
  const covariance = policyLoss.lossMode === 'clip_cov' || policyLoss.lossMode === 'kl_cov';
  computeActorLossGpu(
    engine,
    {
      oldLogProb: rows('old'),
      logProb: rows('lp'),
      advantages: rows('adv'),
      responseMask: rows('mask'),
      // Planes of B·T = 6 rounded up to the 256-byte alignment the recording engine reports.
      extras: { planes: tensor('extras', 4 * 64), plane: 64 } as ActorLossExtras,
      uses: { selected: covariance },
      grads: tensor('grads', 2 * B * T),
      rowPartials: tensor('partials', 8 * B),
      out: tensor('out', 8),
    },
    {
      config: policyLoss,
      aggregation: { mode: 'token-mean', dpSize: 1, batchNumTokens: B * T, globalBatchSize: B, lossScaleFactor: 1 },
      entropyCoeff: 0,
      klLossCoef: 0,
      klLossType: 'low_var_kl',
      B,
      T,
    },
  );
  const loss = dispatches.filter((d) => d.spec === policyLossSpec);
  expect(loss).toHaveLength(1);
  return loss[0].uniforms.lossMode;
}

/** The value of the shader's `const LOSS_MODE_<MODE>: u32 = Nu;`, after checking its switch has that case. */
function shaderModeConstant(mode: string): number {
  const name = `LOSS_MODE_${mode.toUpperCase()}`;
  const constant = policyLossSpec.source.match(new RegExp(`const ${name}: u32 = (\\d+)u;`));
  expect(constant, `policy-loss.wgsl declares ${name}`).not.toBeNull();
  // A case may list several selectors (case LOSS_MODE_DPPO_TV, LOSS_MODE_DPPO_KL).
  expect(policyLossSpec.source, `policy-loss.wgsl has a case for ${name}`).toMatch(
    new RegExp(`case [^:{]*\\b${name}\\b`),
  );
  return Number(constant![1]);
}

describe("each loss_mode reaches the policy-loss kernel's case of that name", () => {
  const constants = VERL_LOSS_MODES.map(shaderModeConstant);
  it('the shader gives every verl loss_mode its own code', () => {
    expect(new Set(constants).size).toBe(VERL_LOSS_MODES.length);
  });

  for (const mode of VERL_LOSS_MODES) {
    it(`actor_rollout_ref.actor.policy_loss.loss_mode=${mode}`, () => {
      // dro has no default β.
      const beta = mode === 'dro' ? ['actor_rollout_ref.actor.policy_loss.dro_beta=0.1'] : [];
      expect(dispatchedLossMode([`actor_rollout_ref.actor.policy_loss.loss_mode=${mode}`, ...beta])).toBe(
        shaderModeConstant(mode),
      );
    });
  }

  // verl's bypass_mode loss dispatches on rollout_correction.loss_type: ppo_clip is vanilla's loss, reinforce gpg's
  // (times the importance weights), whatever policy_loss.loss_mode says.
  for (const [lossType, mode] of [
    ['ppo_clip', 'vanilla'],
    ['reinforce', 'gpg'],
  ]) {
    it(`algorithm.rollout_correction.bypass_mode=true, loss_type=${lossType}`, () => {
      const overrides = [
        'actor_rollout_ref.actor.policy_loss.loss_mode=cispo',
        'algorithm.rollout_correction.bypass_mode=true',
        `algorithm.rollout_correction.loss_type=${lossType}`,
      ];
      expect(dispatchedLossMode(overrides)).toBe(shaderModeConstant(mode));
    });
  }
});
