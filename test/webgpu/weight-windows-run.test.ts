// train.js under a binding below a layer weight (WEBGPU_MAX_BINDING_BYTES=8 KiB): the tiny model's float32
// gate_up_proj [128, 32] is 16 KiB, so every matmul by it runs over windows of its rows (kernels/matmul/matmul.ts
// weightWindows; 8 KiB still holds a rollout row's KV cache layer): the rollout's prefill and decode steps,
// the old log-probs, the reference's forward and the actor update (forward, dx = dy·W, and the weight gradients
// written a window of rows at a time; under LoRA dx = dy·W alone), then AdamW. Micro-batches of one sequence keep
// the activations within the binding. Without the windows the step fails at the rollout's first gate/up product
// ("kernel matmul/register-nt: binding b (tensor actor:model.layers.0.mlp.gate_up_proj.weight, [128, 32]) spans
// 16384 bytes but this device binds at most 8192 bytes").
import { describe, it, vi, afterEach } from 'vitest';
import { grpoStepUnderBinding, makeTinyRun } from '../support/tiny-run.ts';

describe('weight windows in a run', () => {
  afterEach(() => vi.unstubAllEnvs());

  for (const lora of [false, true]) {
    it(`a GRPO step${lora ? ' of LoRA (rank 4) on the float32 base' : ''} under a binding below the layer weights finishes, every loss finite`, async () => {
      const adapters = ['actor_rollout_ref.model.lora_rank=4', 'actor_rollout_ref.model.lora_alpha=8'];
      await grpoStepUnderBinding(await makeTinyRun(), 8 * 1024, 1, lora ? adapters : []);
    });
  }
});
