// train.js with sequences whose q/k/v are above one binding (WEBGPU_MAX_BINDING_BYTES=32 KiB): the experience pads
// responses to data.max_response_length = 240, so each of the tiny model's sequences is 246 tokens and its fused
// q/k/v 246 × 64 floats = 61.5 KiB; the old log-probs, the reference's forward and the actor update run every
// row-wise op over windows of rows and attention over windows of each sequence's queries (models/row-chunks.ts,
// models/attention-windows.ts), against its keys gathered into 246 × 16 floats (15.4 KiB); the step finishes. On main
// before this change it failed at the old log-probs' first dispatch ("kernel embedding/forward-vec4: binding out
// (tensor trunk.infer.a.input, [492, 32]) spans 62976 bytes but this device binds at most 32768 bytes").
import { describe, it, vi, afterEach } from 'vitest';
import { grpoStepUnderBinding, makeTinyRun } from '../support/tiny-run.ts';

describe('token windows in a run', () => {
  afterEach(() => vi.unstubAllEnvs());

  it('a GRPO step whose sequences are above one binding finishes, every loss finite', async () => {
    await grpoStepUnderBinding(await makeTinyRun(), 32 * 1024, 2, ['data.max_response_length=240']);
  });
});
