// The actor's policy-loss keys resolved once (verl's defaults: clip_ratio_low/high default to clip_ratio; the
// policy_loss.* and tau_* defaults of verl's generated ppo_trainer.yaml) and checked the way verl's policy-loss
// functions check them (each mode's check in kernels/ppo/policy-loss-modes.ts).
import { POLICY_LOSS_MODES, type PolicyLossConfig, type PolicyLossMode } from '../../kernels/ppo/ppo-vocabulary.ts';
import { lossModeSpec } from '../../kernels/ppo/policy-loss-modes.ts';

/** actor config keys of the policy loss: the resolved config's fields, each optional, the mode still unchecked, and
 *  clip_ratio, which clip_ratio_low/high default to (as in verl). */
export type PolicyLossOptions = Partial<Omit<PolicyLossConfig, 'lossMode' | 'droBeta'>> & {
  lossMode?: string;
  clipRatio?: number;
  /** dro: policy_loss.dro_beta, null (verl's default) refused when dro runs. */
  droBeta?: number | null;
};

export function resolvePolicyLossConfig(options: PolicyLossOptions): PolicyLossConfig {
  const clipRatio = options.clipRatio ?? 0.2;
  const lossMode = options.lossMode ?? 'vanilla';
  if (!(POLICY_LOSS_MODES as readonly string[]).includes(lossMode)) {
    throw new Error(
      `Unsupported loss mode: ${lossMode}. Supported modes are: ${POLICY_LOSS_MODES.join(', ')} ` +
        `(actor.policy_loss.loss_mode)`,
    );
  }
  const config: PolicyLossConfig = {
    lossMode: lossMode as PolicyLossMode,
    clipRatioLow: options.clipRatioLow ?? clipRatio,
    clipRatioHigh: options.clipRatioHigh ?? clipRatio,
    clipRatioC: options.clipRatioC ?? 3.0,
    tauPos: options.tauPos ?? 1.0,
    tauNeg: options.tauNeg ?? 1.05,
    clipCovRatio: options.clipCovRatio ?? 0.0002,
    clipCovLb: options.clipCovLb ?? 1.0,
    clipCovUb: options.clipCovUb ?? 5.0,
    klCovRatio: options.klCovRatio ?? 0.0002,
    ppoKlCoef: options.ppoKlCoef ?? 0.1,
    ...(options.droBeta === undefined || options.droBeta === null ? {} : { droBeta: options.droBeta }),
  };
  const problem = lossModeSpec(config.lossMode)?.check?.(config);
  if (problem) throw new Error(problem);
  return config;
}
