// `node tools/jsonl-to-parquet.js IN.jsonl OUT.parquet [--gsm8k [--split=train|test]]`: verl-schema Parquet without
// pyarrow. Each JSON line is a row; the Parquet schema is inferred as pyarrow infers it from Python values: objects
// are structs (fields in first-seen order, a field missing from a row is null), arrays are lists, integers int64,
// other numbers double, and every column and field is nullable — so `prompt` becomes list<struct<role, content>>,
// `reward_model` struct<style, ground_truth> and `extra_info` a struct, as verl's preprocessing scripts write them.
// `--gsm8k` first turns GSM8K's raw rows {question, answer} into the rows of verl's
// examples/data_preprocess/gsm8k.py. The output is written under a temporary name and renamed: a bad input line
// leaves no file behind.
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { parseJsonl, type RlRecord } from '../../ppo/data/dataset.ts';

export class ConversionError extends Error {}

type Inferred =
  | { kind: 'null' }
  | { kind: 'string' | 'bool' | 'int' | 'double' }
  | { kind: 'list'; element: Inferred }
  | { kind: 'struct'; fields: Map<string, Inferred> };

const _isObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v);

function describe(t: Inferred): string {
  if (t.kind === 'list') return `list<${describe(t.element)}>`;
  if (t.kind === 'struct') return `struct<${[...t.fields.keys()].join(', ')}>`;
  return t.kind;
}

function typeOf(value: unknown): Inferred {
  if (value === null || value === undefined) return { kind: 'null' };
  if (typeof value === 'string') return { kind: 'string' };
  if (typeof value === 'boolean') return { kind: 'bool' };
  if (typeof value === 'number') return { kind: Number.isInteger(value) ? 'int' : 'double' };
  if (Array.isArray(value))
    return { kind: 'list', element: value.map(typeOf).reduce((a, b) => merge(a, b, ''), { kind: 'null' } as Inferred) };
  const fields = new Map<string, Inferred>();
  for (const [name, member] of Object.entries(value as Record<string, unknown>)) fields.set(name, typeOf(member));
  return { kind: 'struct', fields };
}

/**
 * The type both values fit, as pyarrow widens int to double and null to anything; `path` names the key for a conflict.
 */
function merge(a: Inferred, b: Inferred, path: string): Inferred {
  if (a.kind === 'null') return b;
  if (b.kind === 'null') return a;
  if (a.kind === 'list' && b.kind === 'list')
    return { kind: 'list', element: merge(a.element, b.element, `${path}[]`) };
  if (a.kind === 'struct' && b.kind === 'struct') {
    const fields = new Map(a.fields);
    for (const [name, t] of b.fields)
      fields.set(name, fields.has(name) ? merge(fields.get(name)!, t, path ? `${path}.${name}` : name) : t);
    return { kind: 'struct', fields };
  }
  if ((a.kind === 'int' && b.kind === 'double') || (a.kind === 'double' && b.kind === 'int')) return { kind: 'double' };
  if (a.kind === b.kind) return a;
  throw new ConversionError(
    `${path || 'row'} is ${describe(b)} here but ${describe(a)} in earlier rows (a column holds one type)`,
  );
}

type SchemaElement = Record<string, unknown>;

/** Parquet schema elements of one field, depth first, as pyarrow writes them (3-level lists). */
function schemaOf(name: string, t: Inferred): SchemaElement[] {
  switch (t.kind) {
    case 'null':
    case 'string':
      return [{ name, type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' }];
    case 'bool':
      return [{ name, type: 'BOOLEAN', repetition_type: 'OPTIONAL' }];
    case 'int':
      return [{ name, type: 'INT64', repetition_type: 'OPTIONAL' }];
    case 'double':
      return [{ name, type: 'DOUBLE', repetition_type: 'OPTIONAL' }];
    case 'list':
      return [
        { name, repetition_type: 'OPTIONAL', converted_type: 'LIST', num_children: 1 },
        { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
        ...schemaOf('element', t.element),
      ];
    case 'struct':
      return [
        { name, repetition_type: 'OPTIONAL', num_children: t.fields.size },
        ...[...t.fields].flatMap(([field, ft]) => schemaOf(field, ft)),
      ];
  }
}

/** A value shaped for the writer: int64 as BigInt, a struct with every field of its type (missing ones null). */
function shaped(value: unknown, t: Inferred): unknown {
  if (value === null || value === undefined) return null;
  if (t.kind === 'int') return BigInt(value as number);
  if (t.kind === 'list') return (value as unknown[]).map((v) => shaped(v, t.element));
  if (t.kind === 'struct')
    return Object.fromEntries(
      [...t.fields].map(([name, ft]) => [name, shaped((value as Record<string, unknown>)[name], ft)]),
    );
  return value;
}

/** Parquet bytes of the rows; a type conflict names the row's file and line. */
export function rowsToParquet(records: readonly RlRecord[]): ArrayBuffer {
  if (records.length === 0) throw new ConversionError('no rows (expected one JSON object per line)');
  let row: Inferred = { kind: 'struct', fields: new Map() };
  for (const { row: value, where } of records) {
    try {
      row = merge(row, typeOf(value), '');
    } catch (err) {
      if (err instanceof ConversionError) throw new ConversionError(`${where}: ${err.message}`);
      throw err;
    }
  }
  const fields = (row as Extract<Inferred, { kind: 'struct' }>).fields;
  const schema = [
    { name: 'root', num_children: fields.size },
    ...[...fields].flatMap(([name, t]) => schemaOf(name, t)),
  ];
  const columnData = [...fields].map(([name, t]) => ({ name, data: records.map((r) => shaped(r.row[name], t)) }));
  return parquetWriteBuffer({ columnData, schema } as unknown as Parameters<typeof parquetWriteBuffer>[0]);
}

const GSM8K_INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".';

/**
 * GSM8K's raw row as verl's examples/data_preprocess/gsm8k.py writes it (extract_solution: the first `#### N`, commas
 * removed).
 */
export function gsm8kRow({ row, where }: RlRecord, split: string, index: number): RlRecord {
  const { question, answer } = row;
  if (typeof question !== 'string' || typeof answer !== 'string') {
    throw new ConversionError(
      `${where}: --gsm8k expects GSM8K's raw rows {"question": string, "answer": string}, got keys ` +
        `${Object.keys(row).join(', ') || 'none'}`,
    );
  }
  const solution = /#### (-?[0-9.,]+)/.exec(answer);
  if (solution === null)
    throw new ConversionError(`${where}: answer has no final "#### N" line: ${JSON.stringify(answer.slice(-80))}`);
  return {
    where,
    row: {
      data_source: 'openai/gsm8k',
      prompt: [{ role: 'user', content: `${question} ${GSM8K_INSTRUCTION}` }],
      ability: 'math',
      reward_model: { style: 'rule', ground_truth: solution[1].replace(/,/g, '') },
      extra_info: { split, index, answer, question },
    },
  };
}

const USAGE = 'usage: node tools/jsonl-to-parquet.js IN.jsonl OUT.parquet [--gsm8k [--split=train|test]]';

/** The exit code; prints one line on stdout when done, one on stderr when not. */
export function runJsonlToParquet(argv: string[]): number {
  const files = argv.filter((a) => !a.startsWith('--'));
  const options = argv.filter((a) => a.startsWith('--'));
  const unknown = options.filter((o) => o !== '--gsm8k' && !o.startsWith('--split='));
  const gsm8k = options.includes('--gsm8k');
  const split = options.find((o) => o.startsWith('--split='))?.slice('--split='.length) ?? 'train';
  if (files.length !== 2 || unknown.length > 0 || (!gsm8k && options.length > 0)) {
    console.error(unknown.length > 0 ? `unknown option ${unknown[0]} (${USAGE})` : USAGE);
    return 2;
  }
  const [input, output] = files;
  const temporary = `${output}.${process.pid}.tmp`;
  try {
    let text: string;
    try {
      text = readFileSync(input, 'utf8');
    } catch (err) {
      throw new ConversionError(
        `${input}: cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
      );
    }
    let records: RlRecord[];
    try {
      records = parseJsonl(text, input);
    } catch (err) {
      throw new ConversionError((err as Error).message);
    }
    if (gsm8k) records = records.map((r, i) => gsm8kRow(r, split, i));
    const bytes = rowsToParquet(records);
    writeFileSync(temporary, new Uint8Array(bytes));
    renameSync(temporary, output);
    console.log(
      `${output}: ${records.length} ` +
        `rows${gsm8k ? ` (GSM8K ${split}, as verl's examples/data_preprocess/gsm8k.py)` : ''}`,
    );
    return 0;
  } catch (err) {
    rmSync(temporary, { force: true });
    if (!(err instanceof ConversionError)) throw err;
    console.error(err.message.startsWith(input) ? `error: ${err.message}` : `error: ${input}: ${err.message}`);
    return 1;
  }
}
