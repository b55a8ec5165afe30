// The command line of `node serve.js --model DIR [--port N] [--host 127.0.0.1] ...`: loads the model, serves it
// until SIGINT/SIGTERM, and prints one line once it listens (the URL, with the port the system chose for --port 0).
import { Engine, readKnobs } from '../../engine/index.ts';
import { totalmem } from 'node:os';
import { readFile } from 'node:fs/promises';
import { STOP_SIGNALS } from '../../engine/native-stderr-node.ts';
import { ModelHost, type ServeOptions } from '../serving/model-host-node.ts';
import { ServeHttp } from '../serving/http-server-node.ts';
import { KV_CACHE_DTYPES, SERVE_DTYPES, TORCH_NAME } from '../serving/serve-dtype.ts';

/** SGLang's default port. */
const DEFAULT_PORT = 30000;

interface Flag {
  help: string;
  value: string;
  parse: (text: string, flag: string) => number | string;
}

const integer =
  (min: number, max: number) =>
  (text: string, flag: string): number => {
    const n = Number(text);
    if (!Number.isInteger(n) || n < min || n > max)
      throw new UsageError(`${flag} ${text}: expected an integer in [${min}, ${max}]`);
    return n;
  };
const fraction = (text: string, flag: string): number => {
  const x = Number(text);
  if (!(x > 0 && x <= 1)) throw new UsageError(`${flag} ${text}: expected a number in (0, 1]`);
  return x;
};
const word = (text: string): string => text;
const oneOf =
  (values: readonly string[], note = '') =>
  (text: string, flag: string): string => {
    if (!values.includes(text)) throw new UsageError(`${flag} ${text}: expected one of ${values.join(', ')}${note}`);
    return text;
  };

const FLAGS: Record<string, Flag & { default: number | string | null }> = {
  '--model': {
    value: 'DIR',
    help: 'a Hugging Face model directory (config.json, safetensors, tokenizer.json); required',
    parse: word,
    default: null,
  },
  '--port': {
    value: 'N',
    help: `port to listen on (0: any free port; default ${DEFAULT_PORT})`,
    parse: integer(0, 65535),
    default: DEFAULT_PORT,
  },
  '--host': {
    value: 'ADDR',
    help: 'address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)',
    parse: word,
    default: '127.0.0.1',
  },
  '--served-model-name': {
    value: 'NAME',
    help: 'the model name of /v1/models and requests\' "model" (default: --model as given)',
    parse: word,
    default: null,
  },
  '--max-prompt-tokens': {
    value: 'N',
    help: 'longest prompt accepted, in tokens (default 512)',
    parse: integer(1, 2 ** 20),
    default: 512,
  },
  '--max-new-tokens': {
    value: 'N',
    help: 'largest max_tokens / max_new_tokens accepted (default 512)',
    parse: integer(1, 2 ** 20),
    default: 512,
  },
  '--max-slots': {
    value: 'N',
    help: 'samples decoded at once, at most (default 16; the device may allow fewer)',
    parse: integer(1, 65535),
    default: 16,
  },
  '--max-request-samples': {
    value: 'N',
    help: 'prompts × n one request may ask for (default 4096)',
    parse: integer(1, 2 ** 24),
    default: 4096,
  },
  '--max-logprobs': {
    value: 'N',
    help: "most log-prob alternatives a request may ask for (vLLM's; default 20; -1: the whole vocabulary)",
    parse: integer(-1, 2 ** 31),
    default: 20,
  },
  '--dtype': {
    value: 'DTYPE',
    help:
      `weights' dtype: ${SERVE_DTYPES.join(', ')} (vLLM's; default auto: the checkpoint's torch_dtype, a float32 ` +
      'checkpoint stays float32); bfloat16/float16 hold the matrices in half precision',
    parse: oneOf(SERVE_DTYPES),
    default: 'auto',
  },
  '--kv-cache-dtype': {
    value: 'DTYPE',
    help: `KV cache dtype: ${KV_CACHE_DTYPES.join(', ')} (default auto: --dtype's); a half cache holds twice the sequences`,
    parse: oneOf(KV_CACHE_DTYPES, ' (fp8 caches are not implemented here)'),
    default: 'auto',
  },
  '--gpu-memory-utilization': {
    value: 'X',
    help: "fraction of 4 GiB the decode batch may take (default 0.5, verl's)",
    parse: fraction,
    default: 0.5,
  },
};

export class UsageError extends Error {
  override name = 'UsageError';
}

export function usage(): string {
  const rows = Object.entries(FLAGS).map(([flag, f]) => `  ${`${flag} ${f.value}`.padEnd(30)} ${f.help}`);
  return [
    'usage: node serve.js --model DIR [--port N] [--host ADDR] [options]',
    '',
    'Serves the model over HTTP: OpenAI /v1/completions, /v1/chat/completions, /v1/models; SGLang /generate,',
    '/update_weights_from_disk, /load_lora_adapter, /get_model_info; /health (docs/serving.md).',
    '',
    ...rows,
  ].join('\n');
}

export function parseServeArgs(argv: readonly string[]): ServeOptions & { port: number; host: string } {
  const values = new Map<string, number | string>();
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split(/=(.*)/s, 2);
    const spec = FLAGS[flag];
    if (!spec) {
      const near = Object.keys(FLAGS).find((f) => f.includes(flag.replace(/^-+/, '')) || flag.includes(f.slice(2)));
      throw new UsageError(
        `unknown option ${argv[i]}${near ? ` (did you mean ${near}?)` : ''}; node serve.js --help lists them`,
      );
    }
    const text = inline ?? argv[++i];
    if (text === undefined) throw new UsageError(`${flag} needs a value (${spec.value})`);
    values.set(flag, spec.parse(text, flag));
  }
  const get = (flag: string) => values.get(flag) ?? FLAGS[flag].default;
  const model = get('--model');
  if (model === null) throw new UsageError('--model DIR is required (a Hugging Face model directory)');
  return {
    modelDir: model as string,
    servedModelName: (get('--served-model-name') ?? model) as string,
    port: get('--port') as number,
    host: get('--host') as string,
    maxPromptTokens: get('--max-prompt-tokens') as number,
    maxNewTokens: get('--max-new-tokens') as number,
    maxSlots: get('--max-slots') as number,
    maxRequestSamples: get('--max-request-samples') as number,
    gpuMemoryUtilization: get('--gpu-memory-utilization') as number,
    maxLogprobs: get('--max-logprobs') as number,
    dtype: get('--dtype') as ServeOptions['dtype'],
    kvCacheDtype: get('--kv-cache-dtype') as ServeOptions['kvCacheDtype'],
  };
}

/** Serves until a stop signal; returns the exit status. */
export async function main(argv: readonly string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(usage());
    return 0;
  }
  let options: ReturnType<typeof parseServeArgs>;
  try {
    options = parseServeArgs(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`usage error: ${err.message}`);
    return 2;
  }
  const engine = await Engine.create(readKnobs(), totalmem());
  let host: ModelHost | null = null;
  try {
    host = await ModelHost.open(engine, options);
    // /health answers 200 only once the server listens, after the warm-up compiled the decode loop's pipelines.
    await host.warmUp();
    const { version } = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8'));
    const http = new ServeHttp(host, (line) => console.error(line), version);
    const port = await http.listen(options.port, options.host).catch((err: NodeJS.ErrnoException) => {
      throw new Error(`cannot listen on ${options.host}:${options.port} (${err.code ?? err.message})`);
    });
    const c = host.config;
    const { slots, capacity } = host.batch;
    console.log(
      `serving ${options.servedModelName} (${c.architecture}, ${c.numLayers} layers, vocab ${c.vocabSize}) on ` +
        `http://${options.host}:${port} ` +
        `with ${slots} decode slots of ${capacity} cache positions (${TORCH_NAME[host.dtypes.weights]} weights, ` +
        `${TORCH_NAME[host.dtypes.cache]} KV cache)`,
    );
    const signal = await new Promise<NodeJS.Signals>((resolve) => {
      for (const s of STOP_SIGNALS) process.once(s, () => resolve(s));
    });
    console.log(`${signal}: stopping the server`);
    http.server.closeAllConnections();
    await http.close();
    return 0;
  } finally {
    host?.destroy();
    await engine.sync();
    engine.destroy();
  }
}
