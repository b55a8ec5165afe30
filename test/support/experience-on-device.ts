// For tests that set an experience's per-token inputs by hand (host arrays): the updates read the device tensors,
// so the edited host arrays are uploaded into tensors of their own.
import type { Engine } from '../../engine/index.ts';
import type { Experience } from '../../ppo/phases/experience.ts';

/** `x` whose device tensors of the response mask, old and reference log-probs, values, advantages and returns hold
 *  its host arrays (zeros where one is null). */
export function experienceOnDevice(engine: Engine, x: Experience): Experience {
  const size = x.N * x.R;
  const upload = (name: string, data: Float32Array | null) =>
    engine.tensorFrom(`test.experience.${name}`, [x.N, x.R], data ?? new Float32Array(size));
  return {
    ...x,
    tensors: {
      ...x.tensors,
      mask: upload('mask', x.responseMask),
      old: upload('old', x.oldLogProbs),
      ref: upload('ref', x.refLogProbs),
      values: upload('values', x.values),
      advantages: upload('advantages', x.advantages),
      returns: upload('returns', x.returns),
    },
  };
}
