import { describe, it, expect } from 'vitest';
import { ChatTemplate, applyChatTemplate, type ChatMessage } from '../../models/chat-template.ts';
import { loadTokenizer, readTokenizerFiles } from '../../models/tokenizer-node.ts';
import { describeWithFixtures, fixturePath } from '../support/fixtures.ts';
import { QWEN25_TEMPLATE, QWEN_SPECIAL } from '../support/qwen-chat-template.ts';

const STORIES = fixturePath('hf/stories260K');

const conversation: ChatMessage[] = [
  { role: 'system', content: 'You are a terse math tutor.' },
  { role: 'user', content: 'What is 2+2?' },
  { role: 'assistant', content: '4.' },
  { role: 'user', content: 'And 3+3?' },
];
const addTool = {
  type: 'function',
  function: {
    name: 'add',
    description: 'Add two integers',
    parameters: {
      type: 'object',
      properties: { a: { type: 'integer' }, b: { type: 'integer' } },
      required: ['a', 'b'],
    },
  },
};

// Rendered by Python Jinja2 3.1.6 with transformers' chat-template environment (trim_blocks, lstrip_blocks,
// tojson = json.dumps(ensure_ascii=False)).
const EXPECTED = {
  multiTurnWithGenerationPrompt:
    '<|im_start|>system\nYou are a terse math tutor.<|im_end|>\n<|im_start|>user\nWhat is ' +
    '2+2?<|im_end|>\n<|im_start|>assistant\n4.<|im_end|>\n<|im_start|>user\nAnd ' +
    '3+3?<|im_end|>\n<|im_start|>assistant\n',
  defaultSystemNoGenerationPrompt:
    '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful ' +
    'assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4.<|im_end|>\n',
  withTools:
    '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\nYou may ' +
    'call one or more functions to assist with the user query.\n\nYou are provided with function signatures within ' +
    '<tools></tools> XML tags:\n<tools>\n{"type": "function", "function": {"name": "add", "description": "Add two ' +
    'integers", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, ' +
    '"required": ["a", "b"]}}}\n</tools>\n\nFor each function call, return a json object with function name and ' +
    'arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": ' +
    '<args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n',
};

describe('Qwen2.5 chat template', () => {
  const template = new ChatTemplate({ chat_template: QWEN25_TEMPLATE }, QWEN_SPECIAL);

  it('multi-turn conversation with add_generation_prompt', () => {
    expect(template.render(conversation, { addGenerationPrompt: true })).toBe(EXPECTED.multiTurnWithGenerationPrompt);
  });

  it('inserts the default system prompt, and no assistant opening without add_generation_prompt', () => {
    expect(template.render(conversation.slice(1, 3))).toBe(EXPECTED.defaultSystemNoGenerationPrompt);
  });

  it('renders tool schemas as transformers does', () => {
    expect(template.render(conversation.slice(1, 2), { addGenerationPrompt: true, tools: [addTool] })).toBe(
      EXPECTED.withTools,
    );
  });

  it('chat_template.jinja takes precedence over tokenizer_config.json', () => {
    const fromFile = new ChatTemplate({ chat_template: 'ignored' }, QWEN_SPECIAL, QWEN25_TEMPLATE);
    expect(fromFile.render(conversation, { addGenerationPrompt: true })).toBe(EXPECTED.multiTurnWithGenerationPrompt);
  });
});

describe('templates with special tokens, named templates and errors', () => {
  it('picks the tool_use template when tools are given, default otherwise; extra kwargs reach the template', () => {
    const template = new ChatTemplate(
      {
        chat_template: [
          {
            name: 'default',
            template: 'plain{% if enable_thinking is defined and not enable_thinking %} no-think{% endif %}',
          },
          { name: 'tool_use', template: 'tools={{ tools | length }}' },
        ],
      },
      QWEN_SPECIAL,
    );
    expect(template.render([])).toBe('plain');
    expect(template.render([], { kwargs: { enable_thinking: false } })).toBe('plain no-think');
    expect(template.render([], { tools: [addTool, addTool] })).toBe('tools=2');
  });

  it('raise_exception in a template surfaces as an error; a malformed chat_template is rejected', () => {
    const strict = new ChatTemplate(
      {
        chat_template:
          "{% if messages[0].role != 'user' %}{{ raise_exception('Conversation must start with a user turn') }}{% " +
          'endif %}ok',
      },
      QWEN_SPECIAL,
    );
    expect(strict.render([{ role: 'user', content: 'x' }])).toBe('ok');
    expect(() => strict.render([{ role: 'assistant', content: 'x' }])).toThrow(
      /Conversation must start with a user turn/,
    );
    expect(() => new ChatTemplate({ chat_template: [{ template: 'x' }] }, QWEN_SPECIAL)).toThrow(
      /neither a string nor a list of \{name, template\}/,
    );
    expect(() => new ChatTemplate({ chat_template: '{% for %}' }, QWEN_SPECIAL)).toThrow(
      /chat template 'default' does not parse/,
    );
  });

  describeWithFixtures(
    'on stories260K',
    ['hf/stories260K/tokenizer.json', 'hf/stories260K/tokenizer_config.json'],
    () => {
      const llama2Style =
        "{{ bos_token }}{% for m in messages %}{% if m.role == 'user' %}[INST] {{ m.content }} [/INST]{% else %} {{ " +
        'm.content }}{{ eos_token }}{% endif %}{% endfor %}';

      it('bos/eos in the context, and tokenized without a second <s>', async () => {
        const files = await readTokenizerFiles(STORIES);
        const tokenizer = await loadTokenizer(STORIES);
        const template = new ChatTemplate({ ...files.config, chat_template: llama2Style }, tokenizer.special);
        const messages = [
          { role: 'user', content: 'Hi' },
          { role: 'assistant', content: 'Hello' },
        ];
        const text = template.render(messages);
        expect(text).toBe('<s>[INST] Hi [/INST] Hello</s>');
        const { ids } = await applyChatTemplate(tokenizer, template, messages);
        expect(ids[0]).toBe(1);
        expect(ids[1]).not.toBe(1);
        expect(ids.at(-1)).toBe(2);
        expect(ids).toEqual(await tokenizer.encode(text, { addSpecialTokens: false }));
      });

      it('stories260K has no chat template: a clear error, as in transformers', async () => {
        const files = await readTokenizerFiles(STORIES);
        const { special } = await loadTokenizer(STORIES);
        expect(() => new ChatTemplate(files.config, special, files.chatTemplateFile)).toThrow(
          /no chat_template and there is no chat_template\.jinja: this tokenizer has no chat format; set actor_rollout_ref\.model\.custom_chat_template/,
        );
      });
    },
  );
});
