// test/webgpu runs once per device class (engine/device.ts): every tier under the CPU class, then the files below
// again under the GPU class (WEBGPU_DEVICE_CLASS=gpu), so the variants a GPU chooses run on lavapipe too. Chosen:
// every file that checks a kernel against its reference, the models built of them (forward, backward, decode
// steps, rollout) and the PPO step's numbers. Left to the CPU class: tests of the run around the kernels (command
// line, run directory, checkpoints, resume, signals, config routes, dumps, the trainer's modes), which dispatch
// nothing the chosen files do not and cost ~10× their CPU-class time under the GPU class on lavapipe (its GPU
// variants are many small workgroups, each a loop on a CPU), and device-class-first-step, which runs both classes
// itself. The real-GPU tier (vitest.gpu.config.ts) runs the same files on a
// hardware adapter, where the detected class is gpu.
export const GPU_CLASS_TESTS: string[] = [
  // kernels against their CPU references (every GPU variant)
  'device-class',
  'adamw',
  'adamw8bit',
  'optimizer-offload',
  'attention',
  'binding-split',
  'buffer-split',
  'clear-ranges',
  'decode-attention',
  'cache-windows',
  'decode-layer',
  'embedding',
  'gather-rows',
  'half-weights',
  'head-rmsnorm',
  'kv-cache-write',
  'lm-head',
  'matmul',
  'weight-windows',
  'ppo-kernels',
  'reduce',
  'response-grads',
  'rmsnorm',
  'rope',
  'sample',
  'swiglu',
  'transpose',
  'transposed-weights',
  'value-head',
  // models: the decoder against the CPU reference model and Hugging Face, decode steps, generation
  'causal-lm',
  'decode-groups',
  'logits-windows-serve',
  'decode-step',
  'decoder',
  'gradient-checkpointing',
  'mixed-precision',
  'hf-parity',
  'lora',
  'micro-batching',
  'row-chunks',
  'prefill-chunks',
  'multi-turn-masks',
  'rollout',
  // the trainer: verl's PPO cases, whole runs that learn
  'ppo-verl-cases',
  'ppo-learns',
  'trainer',
].map(webgpuTest);

/**
 * The files the `default-limits` project runs under WebGPU's default limits (WEBGPU_LIMITS=default) and the GPU
 * class, the pairing of the phones and integrated GPUs that give only those limits: the GPU-class files above but
 * ppo-learns, whose whole runs dispatch nothing that the PPO cases and the trainer's steps do not, at several times
 * their cost, plus serving's kernel tests.
 */
export const DEFAULT_LIMITS_TESTS: string[] = [
  ...GPU_CLASS_TESTS.filter((file) => file !== webgpuTest('ppo-learns')),
  // serving's kernels before the sampler: kernels too, so they must fit the default limits as well
  webgpuTest('logits-processors'),
  webgpuTest('top-logprobs'),
  webgpuTest('prompt-logprobs'),
];

function webgpuTest(name: string): string {
  return `test/webgpu/${name}.test.ts`;
}
