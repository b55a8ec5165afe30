// The non-finite guard of a PPO step: a NaN or Inf loss, gradient norm or reward stops the step before the
// optimizer applies it (adamw.wgsl itself skips an update whose gradient norm is non-finite, so the weights on
// the GPU stay those of the last good step). The run then ends with the tensor and step named, and no
// checkpoint is written from the poisoned weights: the last good global_step_N stays the latest.

export class NonFiniteError extends Error {
  override name = 'NonFiniteError';

  constructor(
    readonly tensor: string,
    readonly value: number,
    readonly step: number | null = null,
    lastCheckpoint?: string | null,
  ) {
    super(
      `${step === null ? '' : `step ${step}: `}${tensor} is ${value}; the step was stopped before the optimizer ` +
        `applied it ` +
        '(a diverging run: lower the learning rate, tighten grad_clip, or check the weights and rewards for NaN/Inf)' +
        (lastCheckpoint === undefined
          ? ''
          : lastCheckpoint === null
            ? '; no checkpoint was saved'
            : `; the last good checkpoint is ${lastCheckpoint}`),
    );
  }
}

export function checkFinite(tensor: string, value: number): void {
  if (!Number.isFinite(value)) throw new NonFiniteError(tensor, value);
}

/** Every value of a named tensor (e.g. the rewards of a batch); the first non-finite one is named by index. */
export function checkAllFinite(tensor: string, values: ArrayLike<number>): void {
  for (let i = 0; i < values.length; i++)
    if (!Number.isFinite(values[i])) throw new NonFiniteError(`${tensor}[${i}]`, values[i]);
}

/** Each entry of a record of scalars (a loss kernel's outputs), named `prefix/key`. */
export function checkFiniteRecord(prefix: string, values: Record<string, number>): void {
  for (const [key, value] of Object.entries(values)) checkFinite(`${prefix}/${key}`, value);
}

/**
 * Runs one trainer step; a non-finite value found inside it is reported with the step's number and the checkpoint to go
 * back to.
 */
export async function guardStep<T>(step: number, lastCheckpoint: string | null, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof NonFiniteError && err.step === null)
      throw new NonFiniteError(err.tensor, err.value, step, lastCheckpoint);
    throw err;
  }
}
