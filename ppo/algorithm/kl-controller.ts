// verl's KL coefficient controllers (core_algos.FixedKLController / AdaptiveKLController / get_kl_controller).
// `value` is β; the trainer reads it BEFORE calling update with this step's current_kl and n_steps = batch size.

export interface KLController {
  value: number;
  update(currentKl: number, nSteps: number): void;
}

export class FixedKLController implements KLController {
  constructor(public value: number) {}

  update(): void {}
}

/** Ziegler et al. 2019: β ·= 1 + clip(kl/target − 1, ±0.2)·n_steps/horizon. */
export class AdaptiveKLController implements KLController {
  constructor(
    public value: number,
    readonly target: number,
    readonly horizon: number,
  ) {}

  update(currentKl: number, nSteps: number): void {
    const proportionalError = Math.min(Math.max(currentKl / this.target - 1, -0.2), 0.2);
    this.value *= 1 + (proportionalError * nSteps) / this.horizon;
  }
}

export interface KlCtrlConfig {
  type: string;
  kl_coef: number;
  target_kl?: number;
  horizon?: number;
}

export function getKlController(config: KlCtrlConfig): KLController {
  if (config.type === 'fixed') return new FixedKLController(config.kl_coef);
  if (config.type === 'adaptive') {
    if (!(Number(config.horizon) > 0))
      throw new Error(`algorithm.kl_ctrl.horizon must be larger than 0, got ${config.horizon}`);
    if (!(Number(config.target_kl) > 0))
      throw new Error(`algorithm.kl_ctrl.target_kl must be positive, got ${config.target_kl}`);
    return new AdaptiveKLController(config.kl_coef, Number(config.target_kl), Number(config.horizon));
  }
  throw new Error(`algorithm.kl_ctrl.type: unknown controller "${config.type}" (expected fixed or adaptive)`);
}
