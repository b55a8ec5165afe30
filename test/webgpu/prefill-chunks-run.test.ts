// train.js with prompts whose prefill is above one binding (WEBGPU_MAX_BINDING_BYTES=16 KiB): the tiny model's widest
// activation is gate/up, 2I = 128 floats (512 bytes) a token, so a 42-token prompt needs 21 KiB and the rollout feeds
// it in two calls of at most 32 tokens (chunked prefill, ppo/generation/decoders.ts feedBlock). The trainer's passes
// fit: one sequence of 45 tokens a micro-batch, its (45, W = 64) qkv 11.25 KiB and its MLP in row windows. The GRPO
// step finishes, every loss finite. On main before this change the run stopped at its memory plan ("IncrementalDecoder:
// one sequence's the widest activation of 42 tokens ... needs 21504 bytes, above one binding of 16384").
import { describe, it, expect, vi, afterEach } from 'vitest';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { grpoStepUnderBinding, makeTinyRun } from '../support/tiny-run.ts';
import { arithmeticDataset } from '../../ppo/tasks/arithmetic.ts';
import { IncrementalDecoder } from '../../models/incremental-decoder.ts';

const BINDING = 16 * 1024;

describe('chunked prefill in a run', () => {
  afterEach(() => {
    vi.unstubAllEnvs();
    vi.restoreAllMocks();
  });

  it('a GRPO step whose prompts are above one binding finishes, every loss finite', async () => {
    const run = await makeTinyRun();
    // "0+0+…+a+b=": 40 characters, one token each, between the chat template's two markers.
    const rows = arithmeticDataset({ digits: 1, trainSize: 4, valSize: 0, seed: 3 }).train.map(({ row }) => {
      const [message] = row.prompt as { role: string; content: string }[];
      const content = `${'0+'.repeat(20)}${message.content}`.slice(-40);
      return JSON.stringify({ ...row, prompt: [{ ...message, content }] });
    });
    const data = join(run.root, 'long-prompts.jsonl');
    await writeFile(data, `${rows.join('\n')}\n`);
    const append = vi.spyOn(IncrementalDecoder.prototype, 'append');
    const step = await grpoStepUnderBinding(run, BINDING, 1, [`data.train_files=${data}`, 'data.max_prompt_length=42']);
    // The prompts went in chunks: a call of 21 tokens without logits before each prefill's last.
    expect(append.mock.calls.length).toBeGreaterThan(0);
    expect(append.mock.calls.every(([input]) => input.T === 21)).toBe(true);
    expect(step['prompt_length/max']).toBe(42);
  });
});
