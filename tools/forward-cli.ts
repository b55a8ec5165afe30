// Prints {"logits"} for a causal LM, {"values"} for a critic (*ForTokenClassification) or {"rewards"} for a reward
// model (*ForSequenceClassification), batch-major nested arrays, for input {"input_ids", "attention_mask",
// "position_ids"?}. For parity checks against PyTorch and for debugging.
import { readFileSync } from 'node:fs';
import { Engine } from '../engine/index.ts';
import { loadModel } from '../models/model-files-node.ts';
import { uploadTokenBatch, type HostTokenBatch } from '../models/token-batch.ts';
import { CausalLm } from '../models/causal-lm.ts';
import { ValueModel } from '../models/value-model.ts';

function option(argv: string[], name: string): string {
  const i = argv.indexOf(name);
  if (i < 0 || i + 1 >= argv.length)
    throw new Error(`missing ${name} (usage: node tools/forward.js --model DIR --input FILE.json)`);
  return argv[i + 1];
}

function readInput(file: string): HostTokenBatch {
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new Error(`${file}: cannot read JSON input (${(err as Error).message})`);
  }
  const inputIds = json.input_ids as number[][] | undefined;
  if (!Array.isArray(inputIds) || !inputIds.every(Array.isArray))
    throw new Error(`${file}: input_ids must be a list of lists of token ids`);
  const attentionMask = (json.attention_mask as number[][] | undefined) ?? inputIds.map((row) => row.map(() => 1));
  return { inputIds, attentionMask, positionIds: json.position_ids as number[][] | undefined };
}

function nest(values: Float32Array, dims: number[]): unknown {
  if (dims.length === 1) return Array.from(values);
  const inner = dims.slice(1).reduce((a, b) => a * b, 1);
  return Array.from({ length: dims[0] }, (_, i) => nest(values.subarray(i * inner, (i + 1) * inner), dims.slice(1)));
}

export async function runForward(argv: string[]): Promise<number> {
  const dir = option(argv, '--model');
  const input = readInput(option(argv, '--input'));
  const engine = await Engine.create();
  try {
    const { config, params } = await loadModel(engine, dir);
    const batch = uploadTokenBatch(engine, input, config.vocabSize);
    const { B, T } = batch;
    let output: Record<string, unknown>;
    if (config.head === 'causal-lm') {
      const logits = new CausalLm(engine, config, params).logits(
        batch,
        engine.tensor('logits', [B * T, config.vocabSize]),
      );
      output = { logits: nest(await engine.read(logits), [B, T, config.vocabSize]) };
    } else {
      const model = new ValueModel(engine, config, params);
      if (config.head === 'token-classification') {
        output = { values: nest(await engine.read(model.tokenValues(batch, { saveForBackward: false })), [B, T]) };
      } else {
        output = { rewards: await model.sequenceScores(batch, input.attentionMask) };
      }
    }
    process.stdout.write(`${JSON.stringify(output)}\n`);
    return 0;
  } finally {
    await engine.sync();
    engine.destroy();
  }
}
