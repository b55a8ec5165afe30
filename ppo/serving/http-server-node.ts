// The server's HTTP side (Node's http, no framework): routes, JSON bodies, and errors as OpenAI and SGLang send
// them. Every handler's failure becomes a response: an ApiError its status and body, a checkpoint, tokenizer or
// chat-template problem a 400, anything else a 500 whose message is also logged; the process keeps serving.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { HfConfigError } from '../../models/hf-config.ts';
import { CheckpointError } from '../../models/checkpoint-io-node.ts';
import { SafetensorsError } from '../../models/safetensors.ts';
import { TokenizerError } from '../../models/tokenizer.ts';
import { ApiError } from './api-error.ts';
import { completionText, tokenTexts } from './completion-text.ts';
import {
  COMPLETIONS_DEFAULT_MAX_TOKENS,
  chatResponse,
  completionResponse,
  modelList,
  parseChatRequest,
  parseCompletionRequest,
  type ReportedSample,
} from './openai.ts';
import {
  GENERATE_DEFAULT_MAX_NEW_TOKENS,
  generateResponse,
  parseGenerateRequest,
  parseLoraRequest,
  parseUpdateWeightsRequest,
} from './sglang.ts';
import type { GenerationRequest } from './generation-request.ts';
import type { SampleResult } from './scheduler.ts';
import type { ModelHost } from './model-host-node.ts';
import { ENGINE_SERVER_OWNER } from '../generation/remote/wire-format.ts';

/** Request bodies past this size are refused (a batch of long prompts as token ids stays well below). */
const MAX_BODY_BYTES = 64 * 2 ** 20;

/** Errors that mean "this input is not usable", answered 400 with their message. */
const INPUT_ERRORS = [CheckpointError, HfConfigError, SafetensorsError, TokenizerError];

type Handler = (body: unknown) => Promise<{ status?: number; json?: unknown; text?: string }>;

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new ApiError(413, `the request body exceeds ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ApiError(400, `the request body is not valid JSON (${(err as Error).message})`);
  }
}

function send(res: ServerResponse, status: number, payload: { json?: unknown; text?: string }): void {
  const body = payload.json !== undefined ? JSON.stringify(payload.json) : (payload.text ?? '');
  res.writeHead(status, {
    'content-type': payload.json !== undefined ? 'application/json' : 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

/** An error as a response: the ApiError it is, a 400 for unusable input, else a 500. */
function errorOf(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (INPUT_ERRORS.some((kind) => err instanceof kind) || (err as NodeJS.ErrnoException)?.code === 'ENOENT')
    return new ApiError(400, (err as Error).message);
  return new ApiError(500, `internal error: ${err instanceof Error ? err.message : String(err)}`);
}

export class ServeHttp {
  private readonly routes: Record<string, Record<string, Handler>>;
  readonly server: Server;

  constructor(
    private readonly host: ModelHost,
    private readonly log: (line: string) => void,
  ) {
    const post = (handler: Handler) => ({ POST: handler });
    this.routes = {
      '/health': { GET: async () => ({ text: '' }) },
      '/v1/models': {
        GET: async () => ({
          json: modelList(
            {
              name: host.options.servedModelName,
              root: host.modelPath,
              maxModelLen: host.limits.maxPromptTokens + host.limits.maxNewTokens,
            },
            host.loadedAdapters,
          ),
        }),
      },
      '/get_model_info': {
        // owned_by (as /v1/models says it): tells a client this is this engine's server, which takes sample_offset.
        GET: async () => ({
          json: {
            model_path: host.modelPath,
            tokenizer_path: host.options.modelDir,
            is_generation: true,
            preferred_sampling_params: null,
            weight_version: host.weightVersion,
            owned_by: ENGINE_SERVER_OWNER,
          },
        }),
      },
      '/metrics': { GET: async () => ({ text: this.host.counters.prometheusText() }) },
      '/v1/completions': post((body) => this.completions(body)),
      '/v1/chat/completions': post((body) => this.chat(body)),
      '/generate': post((body) => this.generate(body)),
      '/update_weights_from_disk': post((body) => this.updateWeights(body)),
      '/load_lora_adapter': post((body) => this.loadLora(body, 'sglang')),
      '/unload_lora_adapter': post((body) => this.unloadLora(body, 'sglang')),
      '/v1/load_lora_adapter': post((body) => this.loadLora(body, 'vllm')),
      '/v1/unload_lora_adapter': post((body) => this.unloadLora(body, 'vllm')),
    };
    this.server = createServer((req, res) => void this.handle(req, res));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    try {
      const route = this.routes[path];
      if (!route) throw new ApiError(404, `no route ${req.method} ${path}`);
      const handler = route[req.method ?? ''];
      if (!handler) throw new ApiError(405, `${path} takes ${Object.keys(route).join(', ')}, not ${req.method}`);
      const body = req.method === 'POST' ? await readBody(req) : {};
      const { status = 200, ...payload } = await handler(body);
      if (req.method === 'POST' && status === 200) this.host.counters.answered(path);
      send(res, status, payload);
    } catch (err) {
      const error = errorOf(err);
      if (error.status >= 500) this.log(`${req.method} ${path}: ${error.message}`);
      if (!res.headersSent) send(res, error.status, { json: error.body() });
      else res.destroy();
    }
  }

  /** The request's `model`: the served model, or a loaded adapter's name; anything else is vLLM's 404. */
  private adapterOfModel(model: string | null): string | null {
    if (model === null || model === this.host.options.servedModelName) return null;
    if (this.host.hasAdapter(model)) return model;
    throw new ApiError(404, `The model \`${model}\` does not exist.`, 'model', 'NotFoundError');
  }

  private async report(
    request: GenerationRequest,
    samples: readonly SampleResult[],
    promptIds: number[][],
    withTokenTexts: boolean,
  ): Promise<ReportedSample[]> {
    const tokenizer = this.host.tokenizer;
    this.host.counters.generated(samples.reduce((n, s) => n + s.tokens.length, 0));
    return Promise.all(
      samples.map(async (s) => ({
        ...(await completionText(tokenizer, s, request)),
        tokens: s.tokens,
        logprobs: s.logprobs,
        promptIds: promptIds[s.prompt],
        tokenTexts: withTokenTexts ? await tokenTexts(tokenizer, s.tokens) : [],
      })),
    );
  }

  private async completions(body: unknown) {
    const c = parseCompletionRequest(body);
    c.request.adapter = this.adapterOfModel(c.model);
    const promptIds = await this.host.tokenize(c.request.prompts);
    const samples = await this.host.generate(c.request, promptIds, COMPLETIONS_DEFAULT_MAX_TOKENS, 'prompt');
    const reported = await this.report(c.request, samples, promptIds, c.logprobs);
    return {
      json: completionResponse(
        c.model ?? this.host.options.servedModelName,
        reported,
        promptIds.reduce((n, p) => n + p.length, 0),
        c,
      ),
    };
  }

  private async chat(body: unknown) {
    const c = parseChatRequest(body);
    c.request.adapter = this.adapterOfModel(c.model);
    const promptIds = [await this.host.chatPrompt(c.messages, c.addGenerationPrompt, c.templateKwargs)];
    const samples = await this.host.generate(c.request, promptIds, this.host.limits.maxNewTokens, 'messages');
    const reported = await this.report(c.request, samples, promptIds, c.logprobs);
    return { json: chatResponse(c.model ?? this.host.options.servedModelName, reported, promptIds[0].length, c) };
  }

  private async generate(body: unknown) {
    const started = performance.now();
    const g = parseGenerateRequest(body);
    const promptIds = await this.host.tokenize(g.request.prompts);
    const samples = await this.host.generate(
      g.request,
      promptIds,
      GENERATE_DEFAULT_MAX_NEW_TOKENS,
      g.request.prompts.length > 0 && 'ids' in g.request.prompts[0] ? 'input_ids' : 'text',
    );
    const reported = await this.report(g.request, samples, promptIds, false);
    const generated = reported.map((s) => ({ ...s, promptTokens: s.promptIds.length }));
    return { json: generateResponse(generated, g, (performance.now() - started) / 1000, this.host.weightVersion) };
  }

  /** SGLang's answer: {success, message, num_paused_requests}, 200 or 400; the old weights serve on after a refusal. */
  private async updateWeights(body: unknown) {
    const { modelPath, weightVersion } = parseUpdateWeightsRequest(body);
    try {
      await this.host.updateWeightsFromDisk(modelPath);
    } catch (err) {
      const error = errorOf(err);
      if (error.status >= 500) throw error;
      return {
        status: 400,
        json: {
          success: false,
          message: `Failed to update weights: ${error.message}. The previous weights are still served.`,
          num_paused_requests: 0,
        },
      };
    }
    if (weightVersion !== null) this.host.weightVersion = weightVersion;
    return { json: { success: true, message: 'Succeeded to update model weights.', num_paused_requests: 0 } };
  }

  /** SGLang answers {success, error_message, loaded_adapters}; vLLM a line of text, or its error body. */
  private async loadLora(body: unknown, protocol: 'sglang' | 'vllm') {
    const { name, path } = parseLoraRequest(body, true);
    return this.loraChange(
      protocol,
      () => this.host.loadLoraAdapter(name, path),
      `Success: LoRA adapter '${name}' added successfully.`,
    );
  }

  private async unloadLora(body: unknown, protocol: 'sglang' | 'vllm') {
    const { name } = parseLoraRequest(body, false);
    return this.loraChange(
      protocol,
      () => this.host.unloadLoraAdapter(name),
      `Success: LoRA adapter '${name}' removed successfully.`,
    );
  }

  private async loraChange(protocol: 'sglang' | 'vllm', change: () => Promise<void>, vllmSuccess: string) {
    const loaded = () => Object.fromEntries(this.host.loadedAdapters.map((a) => [a.name, a.path]));
    try {
      await change();
    } catch (err) {
      const error = errorOf(err);
      if (protocol === 'vllm' || error.status >= 500) throw error;
      return { status: 400, json: { success: false, error_message: error.message, loaded_adapters: loaded() } };
    }
    return protocol === 'vllm'
      ? { text: vllmSuccess }
      : { json: { success: true, error_message: null, loaded_adapters: loaded() } };
  }

  listen(port: number, hostname: string): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, hostname, () => {
        this.server.off('error', reject);
        const address = this.server.address();
        resolve(typeof address === 'object' && address !== null ? address.port : port);
      });
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
