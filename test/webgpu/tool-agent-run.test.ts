// verl's tool agent loop on a tiny model: a word vocabulary in which a whole GSM8K tool call is three tokens
// (<tool_call>, its JSON, </tool_call>), so a fresh model sampling hot writes calls, malformed ones too. The rollout
// with a ToolAgentSession masks exactly the tool messages out of the loss; `node train.js`'s entry point runs a
// few GRPO steps with verl's GSM8K tool config and reports the agent loop's metrics.
import { describe, it, expect } from 'vitest';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gpuEngine } from '../support/gpu-engine.ts';
import { tinyQwen3Config } from '../../models/presets.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { initialParameters } from '../../models/init.ts';
import { saveModel } from '../../models/model-files-node.ts';
import { WordTokenizer } from '../../models/word-tokenizer.ts';
import { builtinTokenizerFiles } from '../../models/word-level-tokenizer.ts';
import { ChatTemplate } from '../../models/chat-template.ts';
import { RolloutGenerator } from '../../ppo/phases/rollout.ts';
import { ToolAgentSession } from '../../ppo/environments/tool-agent/tool-agent.ts';
import { loadTools } from '../../ppo/environments/tool-agent/tool-loader-node.ts';
import { main } from '../../ppo/jobs/ppo-job-node.ts';
import { runMetrics } from '../support/tiny-run.ts';
import { makeTempDir } from '../support/temp-dir.ts';
import { VERL_B178A3CD_ROOT } from '../support/verl-script-argv.ts';

/** verl b178a3cd's own GSM8K tool config (byte for byte). */
const GSM8K_TOOLS = `${VERL_B178A3CD_ROOT}/examples/sglang_multiturn/config/tool_config/gsm8k_tool_config.yaml`;
const CALL = '{"name":"calc_gsm8k_reward","arguments":{"answer":"3"}}';
const tokenizer = new WordTokenizer({
  specialTokens: [
    '<pad>',
    '<s>',
    '</s>',
    '<|im_start|>',
    '<|im_end|>',
    '<tool_call>',
    '</tool_call>',
    '<tool_response>',
    '</tool_response>',
  ],
  words: [
    'user',
    'assistant',
    'what',
    'is',
    '1',
    '+',
    '2',
    '3',
    '####',
    CALL,
    'Current',
    'parsed',
    "answer='3'",
    'reward=1.0',
  ],
});
/** Qwen's shape in the small vocabulary: turns between <|im_start|> and <|im_end|>, tool texts in <tool_response>. */
const TEMPLATE =
  "{%- for m in messages -%}{%- if m.role == 'tool' -%}<tool_response>{{ ' ' + m.content }}</tool_response>" +
  "{%- else -%}<|im_start|>{{ ' ' + m.role + ' ' + m.content }}<|im_end|>{%- endif -%}{%- endfor -%}" +
  '{%- if add_generation_prompt -%}<|im_start|> assistant{%- endif -%}';
const ROW = {
  data_source: 'openai/gsm8k',
  prompt: [{ role: 'user', content: 'what is 1 + 2' }],
  reward_model: { style: 'rule', ground_truth: '3' },
  extra_info: { tools_kwargs: { calc_gsm8k_reward: { create_kwargs: { ground_truth: '3' } } } },
};

async function tinyModel(root: string): Promise<string> {
  const engine = await gpuEngine();
  const dir = join(root, 'model');
  const config = tinyQwen3Config(tokenizer.tokens.length, {
    layers: 1,
    hidden: 32,
    heads: 2,
    kvHeads: 1,
    headDim: 16,
    intermediate: 64,
  });
  const params = createParameterArena(engine, config, 'actor');
  uploadArenaTensors(engine, params, initialParameters(config, 5));
  await saveModel(engine, dir, config, params);
  const files = builtinTokenizerFiles(tokenizer, TEMPLATE);
  await writeFile(join(dir, 'tokenizer.json'), JSON.stringify(files.tokenizerJson));
  await writeFile(join(dir, 'tokenizer_config.json'), JSON.stringify(files.tokenizerConfig));
  return dir;
}

describe('tool agent run', () => {
  it('the rollout masks exactly the tool messages out of the loss (response_mask 0), in the order the tools ' +
    'answered', async () => {
    const engine = await gpuEngine();
    const config = tinyQwen3Config(tokenizer.tokens.length, {
      layers: 1,
      hidden: 32,
      heads: 2,
      kvHeads: 1,
      headDim: 16,
      intermediate: 64,
    });
    const params = createParameterArena(engine, config, 'policy');
    uploadArenaTensors(engine, params, initialParameters(config, 5));
    const template = new ChatTemplate({ chat_template: TEMPLATE }, {} as never);
    const tools = await loadTools(GSM8K_TOOLS);
    const agent = {
      tools: new Map(tools.map((t) => [t.name, t])),
      schemas: tools.map((t) => t.schema),
      template,
      tokenizer: {
        encode: async (text: string) => tokenizer.encode(text),
        decode: async (ids: readonly number[]) => tokenizer.decode(ids),
      },
      settings: {
        maxAssistantTurns: 3,
        maxUserTurns: null,
        maxParallelCalls: 1,
        maxToolResponseLength: 24,
        truncateSide: 'middle' as const,
      },
    };
    const prompt = tokenizer.encode(template.render(ROW.prompt, { addGenerationPrompt: true }));
    const samples = 32;
    const session = new ToolAgentSession(agent, samples, () => ROW.extra_info.tools_kwargs, 64);
    const observed: number[][][] = Array.from({ length: samples }, () => []);
    const recording = Object.assign(Object.create(session) as ToolAgentSession, {
      observe: async (turn: number, ended: Parameters<ToolAgentSession['observe']>[1]) => {
        const observations = await session.observe(turn, ended);
        ended.forEach((e, k) => observations[k] && observed[e.sample].push(observations[k]!));
        return observations;
      },
    });
    const generator = new RolloutGenerator(engine, { config, params });
    const batch = await generator.generate(
      new Array(8).fill(prompt),
      {
        n: 4,
        maxResponseLength: 64,
        eosTokenIds: [2],
        padTokenId: 0,
        temperature: 1.5,
        topK: -1,
        topP: 1,
        seed: 11,
      },
      recording,
    );
    generator.release();
    let toolMessages = 0;
    for (let i = 0; i < samples; i++) {
      const length = batch.responseLengths[i];
      const masked = batch.responses[i].slice(0, length).filter((_, t) => batch.responseMask[i][t] === 0);
      // The tool messages, in order (the session returns none that would leave no room to answer).
      const appended = observed[i];
      expect(masked, `sample ${i}`).toEqual(appended.flat());
      toolMessages += appended.length;
      // Every tool message follows a model turn that wrote a call and precedes the model's next turn.
      if (appended.length > 0) expect(tokenizer.decode(batch.responses[i].slice(0, length))).toContain('<tool_call>');
    }
    expect(toolMessages).toBeGreaterThan(0);
    expect(session.metrics()['tool_call_counts/max']).toBeGreaterThan(0);
  }, 300_000);

  it("GRPO steps with verl's GSM8K tool config through train.js's entry point log the agent loop's " +
    'metrics', async () => {
    const root = await makeTempDir('tool-run-');
    const model = await tinyModel(root);
    const data = join(root, 'train.jsonl');
    await writeFile(data, `${Array.from({ length: 4 }, () => JSON.stringify(ROW)).join('\n')}\n`);
    const dir = join(root, 'run');
    expect(
      await main([
        `actor_rollout_ref.model.path=${model}`,
        `data.train_files=${data}`,
        `data.val_files=${data}`,
        'data.train_batch_size=2',
        'data.max_prompt_length=16',
        'data.max_response_length=32',
        'algorithm.adv_estimator=grpo',
        'actor_rollout_ref.rollout.n=4',
        'actor_rollout_ref.actor.ppo_mini_batch_size=2',
        'actor_rollout_ref.rollout.temperature=1.5',
        'actor_rollout_ref.actor.optim.lr=1e-2',
        'trainer.val_before_train=true',
        'trainer.test_freq=-1',
        'trainer.save_freq=1000',
        'trainer.logger=[file]',
        'trainer.total_training_steps=2',
        `trainer.default_local_dir=${dir}`,
        'actor_rollout_ref.rollout.multi_turn.enable=true',
        `actor_rollout_ref.rollout.multi_turn.tool_config_path=${GSM8K_TOOLS}`,
        'actor_rollout_ref.rollout.multi_turn.max_assistant_turns=3',
      ]),
    ).toBe(0);
    const lines = (await runMetrics(dir)).map((l) => l.data);
    const steps = lines.filter((m) => m['critic/score/mean'] !== undefined);
    expect(steps).toHaveLength(2);
    for (const m of steps) {
      expect(m['num_turns/min']).toBeGreaterThanOrEqual(2);
      // At most 3 model turns and 2 tool turns, plus the prompt.
      expect(m['num_turns/max']).toBeLessThanOrEqual(6);
      expect(m['tool_call_counts/max']).toBeLessThanOrEqual(2);
      for (const kind of ['malformed', 'error', 'timeout', 'non_text'])
        expect(m[`tool_call_failures/${kind}`]).toBeGreaterThanOrEqual(0);
      expect(m['agent_loop/tool_calls/mean']).toBeGreaterThanOrEqual(0);
    }
    expect(Math.max(...steps.map((m) => m['tool_call_counts/max']))).toBeGreaterThan(0);
    const validation = lines.find((m) => m['val/test_score/mean'] !== undefined)!;
    expect(validation['val-aux/num_turns/min']).toBeGreaterThanOrEqual(2);
    expect(validation['val/tool_call_counts/mean']).toBeGreaterThanOrEqual(0);
  }, 300_000);
});
