// Chat templates with transformers' apply_chat_template semantics: the Jinja source from
// chat_template.jinja or tokenizer_config.json's chat_template (a string or named templates), rendered by
// @huggingface/jinja (trim_blocks and lstrip_blocks, raise_exception, strftime_now, as transformers sets
// them) with messages, tools, add_generation_prompt and the special tokens in the context.
// Browser-safe: takes parsed config and text.

import { Template } from '@huggingface/jinja';
import type { Tokenizer, TokenizerConfig, SpecialTokens } from './tokenizer.ts';

export interface ChatMessage {
  role: string;
  content: string;
  [key: string]: unknown;
}

export interface ChatTemplateOptions {
  /** End with the opening of an assistant turn, so generation continues as the assistant. */
  addGenerationPrompt?: boolean;
  /** Tool (function) schemas, for templates that render them. */
  tools?: unknown[] | null;
  /** Further template variables, e.g. Qwen3's enable_thinking. */
  kwargs?: Record<string, unknown>;
}

export class ChatTemplateError extends Error {
  override name = 'ChatTemplateError';
}

/** Name → template source, from chat_template.jinja (which wins, as in transformers) or tokenizer_config.json. */
function templateSources(config: TokenizerConfig, chatTemplateFile: string | null): Map<string, string> {
  if (chatTemplateFile !== null) return new Map([['default', chatTemplateFile]]);
  const t = config.chat_template;
  if (t === undefined || t === null) return new Map();
  if (typeof t === 'string') return new Map([['default', t]]);
  const named = Array.isArray(t) && t.every((e) => typeof e?.name === 'string' && typeof e?.template === 'string');
  if (!named)
    throw new ChatTemplateError(
      `tokenizer_config.json: chat_template is neither a string nor a list of {name, template}`,
    );
  return new Map((t as { name: string; template: string }[]).map((e) => [e.name, e.template]));
}

export class ChatTemplate {
  private readonly templates: Map<string, Template>;
  private readonly tokenContext: Record<string, unknown>;

  /**
   * Throws when the tokenizer has no template (base models such as stories260K), as transformers does:
   * prompts for such models are tokenized as plain text.
   */
  constructor(config: TokenizerConfig, special: SpecialTokens, chatTemplateFile: string | null = null) {
    const sources = templateSources(config, chatTemplateFile);
    if (sources.size === 0) {
      throw new ChatTemplateError(
        'tokenizer_config.json has no chat_template and there is no chat_template.jinja: this tokenizer has no chat ' +
          'format; ' +
          "set actor_rollout_ref.model.custom_chat_template (e.g. '{{ messages[-1].content }}' gives the model the " +
          'prompt as plain text)',
      );
    }
    this.templates = new Map();
    for (const [name, source] of sources) {
      try {
        this.templates.set(name, new Template(source));
      } catch (err) {
        throw new ChatTemplateError(`chat template '${name}' does not parse: ${(err as Error).message}`);
      }
    }
    // transformers passes the special tokens that are set, as strings, plus additional_special_tokens.
    this.tokenContext = {};
    for (const [key, token] of Object.entries(special)) if (token) this.tokenContext[`${key}_token`] = token.token;
    const extra = config.additional_special_tokens;
    if (Array.isArray(extra))
      this.tokenContext.additional_special_tokens = extra.map((t) => (typeof t === 'string' ? t : t?.content));
  }

  render(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}): string {
    const tools = options.tools ?? null;
    // As transformers: a 'tool_use' template when tools are given and one exists, else 'default'.
    const name = tools && this.templates.has('tool_use') ? 'tool_use' : 'default';
    const template = this.templates.get(name);
    if (!template)
      throw new ChatTemplateError(`no chat template named '${name}' (have: ${[...this.templates.keys()].join(', ')})`);
    return template.render({
      ...this.tokenContext,
      ...options.kwargs,
      messages,
      tools,
      add_generation_prompt: options.addGenerationPrompt ?? false,
    });
  }
}

/**
 * apply_chat_template(tokenize=True): renders, then encodes without adding special tokens, because the
 * template already writes them (a second <s> would change the model's input). Returns the text and its ids.
 */
export async function applyChatTemplate(
  tokenizer: Pick<Tokenizer, 'encode'>,
  template: ChatTemplate,
  messages: readonly ChatMessage[],
  options: ChatTemplateOptions = {},
): Promise<{ text: string; ids: number[] }> {
  const text = template.render(messages, options);
  return { text, ids: await tokenizer.encode(text, { addSpecialTokens: false }) };
}
