// Frozen-reference lab: `node --import ./tools/node-loader.js tools/kernel-lab/half-reference.ts [hidden] [layers] [B]
// [T]` writes a Qwen3-shaped bf16 checkpoint (real vocabulary 151,936, random weights; hidden 128 × 2 layers by
// default, or Qwen3-0.6B's layer at hidden 1024) to a temporary directory, loads it as a float32 and as a bf16
// reference, and prints each one's arena bytes and the time of the reference log-prob forward (B = 4 sequences × T =
// 128 tokens), the two timed alternately in the same process (medians of 5; CPU time on a software device, which holds
// steady when other processes share the cores).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine, describeDevice, type Arena } from '../../engine/index.ts';
import { loadModel } from '../../models/model-files-node.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { uploadTokenBatch } from '../../models/token-batch.ts';
import { writeQwen3Model, QWEN3_TINY_LAYER, QWEN3_0_6B_LAYER } from '../qwen3-model.ts';
import { median } from '../bench/harness.ts';

const hidden = Number(process.argv[2] ?? 128);
const layers = Number(process.argv[3] ?? 2);
const [B, T] = [Number(process.argv[4] ?? 4), Number(process.argv[5] ?? 128)];
const engine = await Engine.create();
const root = await mkdtemp(join(tmpdir(), 'half-reference-'));
try {
  await writeQwen3Model(root, { ...(hidden === 1024 ? QWEN3_0_6B_LAYER : { ...QWEN3_TINY_LAYER, hidden }), layers });
  const f32 = await loadModel(engine, root, { label: 'reference-f32' });
  const bf16 = await loadModel(engine, root, { label: 'reference-bf16', weightDtype: () => 'bf16' });
  const inputIds = Array.from({ length: B }, (_, b) =>
    Array.from({ length: T }, (_, t) => (b * 7919 + t * 104729) % 151936),
  );
  const attentionMask = inputIds.map((row) => row.map(() => 1));
  const targets = engine.tensorFrom(
    'targets',
    [B * T],
    inputIds.flatMap((row) => [...row.slice(1), 151645]),
    'u32',
  );
  const batch = uploadTokenBatch(engine, { inputIds, attentionMask }, f32.config.vocabSize, 'half-reference');
  const forward = async (params: Arena): Promise<number> => {
    const lm = new CausalLm(engine, f32.config, params);
    await engine.sync();
    const [start, cpu] = [performance.now(), process.cpuUsage()];
    await engine.read(lm.tokenLogprobs(batch, targets, { saveForBackward: false }).logprobs);
    const used = process.cpuUsage(cpu);
    return engine.caps.softwareAdapter ? (used.user + used.system) / 1000 : performance.now() - start;
  };
  await forward(f32.params);
  await forward(bf16.params);
  const times: Record<'f32' | 'bf16', number[]> = { f32: [], bf16: [] };
  for (let i = 0; i < 5; i++) {
    times.f32.push(await forward(f32.params));
    times.bf16.push(await forward(bf16.params));
  }
  const mb = (params: Arena) => ((params.totalElements * 4) / 1e6).toFixed(1);
  console.log(`device: ${describeDevice(engine.caps, engine.knobs)}`);
  console.log(
    `Qwen3-shaped hidden ${hidden} × ${layers} layers, vocabulary 151,936: reference arena ${mb(f32.params)} MB ` +
      `float32, ${mb(bf16.params)} MB bf16`,
  );
  console.log(
    `reference log-probs of ${B} × ${T} tokens (${engine.caps.softwareAdapter ? 'CPU' : 'wall'} ms, median of 5): float32 ${median(times.f32).toFixed(0)}, bf16 ${median(times.bf16).toFixed(0)} (${(median(times.bf16) / median(times.f32)).toFixed(2)}x)`,
  );
} finally {
  await rm(root, { recursive: true, force: true });
  engine.destroy();
}
