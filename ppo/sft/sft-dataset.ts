// verl's SFT datasets (verl/utils/dataset/sft_dataset.py and multiturn_sft_dataset.py) as SftExamples. Single
// turn: the prompt is row[data.prompt_key] (then each of data.prompt_dict_keys, for a column of nested mappings such
// as GSM8K's extra_info), given to the chat template as one user message with the generation prompt; the response is
// row[data.response_key] (and data.response_dict_keys) followed by the EOS token; the loss is on the response.
// Multi-turn (data.multiturn.enable): row[data.multiturn.messages_key] is a conversation rendered by the chat
// template, the loss on each assistant turn's tokens (its content and end-of-turn tokens, not the header the
// generation prompt writes) and on nothing else. data.max_length with data.truncation: error names the row; left
// keeps the last tokens, right the first (verl keeps its loss mask by position after a left cut; here each kept
// token keeps its own mask). Browser-safe.
import { applyChatTemplate, type ChatMessage, type ChatTemplate } from '../../models/chat-template.ts';
import type { Tokenizer } from '../../models/tokenizer.ts';
import type { RlRecord } from '../data/dataset.ts';
import type { SftExample } from './sft-trainer.ts';

export interface SftDataOptions {
  prompt_key: string;
  response_key: string;
  prompt_dict_keys: readonly string[] | null;
  response_dict_keys: readonly string[] | null;
  multiturn: { enable: boolean; messages_key: string };
  max_length: number;
  truncation: 'error' | 'left' | 'right';
  tokenizer: Pick<Tokenizer, 'encode' | 'special'>;
  template: ChatTemplate;
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** row[key], then [dictKey] for each dict key while the value is a mapping; must end as text. */
function textField(record: RlRecord, key: string, dictKeys: readonly string[] | null, option: string): string {
  let value = record.row[key];
  let path = key;
  for (const dictKey of dictKeys ?? []) {
    if (!isMapping(value)) break;
    value = value[dictKey];
    path += `.${dictKey}`;
  }
  if (typeof value !== 'string') {
    const found =
      value === undefined
        ? `is missing (columns: ${Object.keys(record.row).join(', ')})`
        : `is ${JSON.stringify(value).slice(0, 60)}`;
    throw new Error(`${record.where}: '${path}' ${found}; expected text (set ${option})`);
  }
  return value;
}

/** Prompt tokens, then response tokens with their loss mask, from (tokens, trained) segments in order. */
function fromSegments(segments: readonly { ids: number[]; trained: boolean }[], where: string): SftExample {
  const ids = segments.flatMap((s) => s.ids);
  const mask = segments.flatMap((s) => s.ids.map(() => (s.trained ? 1 : 0)));
  const first = mask.indexOf(1);
  if (first < 0) throw new Error(`${where}: no assistant tokens to train on`);
  return { prompt: ids.slice(0, first), response: ids.slice(first), responseMask: mask.slice(first) };
}

async function multiturnSegments(
  record: RlRecord,
  options: SftDataOptions,
): Promise<{ ids: number[]; trained: boolean }[]> {
  const key = options.multiturn.messages_key;
  const messages = record.row[key];
  if (
    !Array.isArray(messages) ||
    messages.length === 0 ||
    !messages.every((m) => isMapping(m) && typeof m.role === 'string' && typeof m.content === 'string')
  ) {
    throw new Error(
      `${record.where}: '${key}' must be a non-empty list of {role, content} messages (data.multiturn.messages_key)`,
    );
  }
  const conversation = messages as ChatMessage[];
  // Each turn's tokens are the difference between the rendered conversation up to it and up to the turn before; an
  // assistant turn's header is the generation prompt's difference, and is context, not trained on.
  const segments: { ids: number[]; trained: boolean }[] = [];
  let rendered = '';
  const piece = async (text: string, trained: boolean) => {
    if (!text.startsWith(rendered))
      throw new Error(
        `${record.where}: the chat template does not render this conversation turn by turn (a turn changes what came ` +
          `before it)`,
      );
    const ids = await options.tokenizer.encode(text.slice(rendered.length), { addSpecialTokens: false });
    rendered = text;
    segments.push({ ids, trained });
  };
  for (let i = 0; i < conversation.length; i++) {
    if (conversation[i].role === 'assistant')
      await piece(options.template.render(conversation.slice(0, i), { addGenerationPrompt: true }), false);
    await piece(options.template.render(conversation.slice(0, i + 1)), conversation[i].role === 'assistant');
  }
  return segments;
}

async function singleTurnSegments(
  record: RlRecord,
  options: SftDataOptions,
): Promise<{ ids: number[]; trained: boolean }[]> {
  const prompt = textField(
    record,
    options.prompt_key,
    options.prompt_dict_keys,
    'data.prompt_key / data.prompt_dict_keys',
  );
  const response = textField(
    record,
    options.response_key,
    options.response_dict_keys,
    'data.response_key / data.response_dict_keys',
  );
  const eos = options.tokenizer.special.eos;
  if (!eos) throw new Error('the tokenizer has no eos_token; an SFT response ends with it');
  const promptIds = (
    await applyChatTemplate(options.tokenizer, options.template, [{ role: 'user', content: prompt }], {
      addGenerationPrompt: true,
    })
  ).ids;
  const responseIds = await options.tokenizer.encode(response + eos.token, { addSpecialTokens: false });
  return [
    { ids: promptIds, trained: false },
    { ids: responseIds, trained: true },
  ];
}

function truncate(segments: { ids: number[]; trained: boolean }[], options: SftDataOptions, where: string) {
  const length = segments.reduce((n, s) => n + s.ids.length, 0);
  if (length <= options.max_length) return segments;
  if (options.truncation === 'error')
    throw new Error(
      `${where}: ${length} tokens exceed data.max_length=${options.max_length} (data.truncation=error; left or right ` +
        `cuts it)`,
    );
  const tokens = segments.flatMap((s) => s.ids.map((id) => ({ ids: [id], trained: s.trained })));
  return options.truncation === 'left'
    ? tokens.slice(length - options.max_length)
    : tokens.slice(0, options.max_length);
}

export async function buildSftExamples(records: readonly RlRecord[], options: SftDataOptions): Promise<SftExample[]> {
  const examples: SftExample[] = [];
  for (const record of records) {
    const segments = options.multiturn.enable
      ? await multiturnSegments(record, options)
      : await singleTurnSegments(record, options);
    examples.push(fromSegments(truncate(segments, options, record.where), record.where));
  }
  return examples;
}
