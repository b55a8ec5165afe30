// train.js under a binding too small for the MLP's gate/up activation (WEBGPU_MAX_BINDING_BYTES=16 KiB): a
// micro-batch of the tiny model (4 sequences of 6 prompt + 3 response tokens) has an 18 KiB (R = 36, 2I = 128)
// gate/up activation and a 9 KiB (R, W = 64) qkv, so the trunk runs its MLP over windows of rows in the old
// log-probs, the reference's forward and the actor update, and the step finishes. On main before this change it
// failed at the first gate/up dispatch ("binding out (tensor trunk.infer.a.gateUp, [36, 128]) spans 18432 bytes").
import { describe, it, vi, afterEach } from 'vitest';
import { grpoStepUnderBinding, makeTinyRun } from '../support/tiny-run.ts';

describe('MLP row windows in a run', () => {
  afterEach(() => vi.unstubAllEnvs());

  it('a GRPO step under a binding below the gate/up activation finishes, every loss finite', async () => {
    await grpoStepUnderBinding(await makeTinyRun(), 16 * 1024, 4);
  });
});
