import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  parseSafetensors,
  serializeSafetensors,
  planShards,
  parseShardIndex,
  MAX_HEADER_BYTES,
  INDEX_FILE,
  type TensorData,
} from '../../models/safetensors.ts';
import { f32ToBf16Bits, bf16BitsToF32, f32ToF16Bits, f16BitsToF32 } from '../../engine/half-float.ts';
import {
  CheckpointTensors,
  SafetensorsFile,
  writeCheckpointTensors,
  type TensorSource,
} from '../../models/safetensors-node.ts';
import { randomArray } from '../support/arrays.ts';
import { describeWithFixtures, fixturePath } from '../support/fixtures.ts';

const HF = fixturePath('hf');

/** Bit patterns as a string: equal strings mean bit-identical tensors, and comparing them stays fast. */
function bits(a: TensorData): string {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString('hex');
}

/** A safetensors file from a header given as JSON (or raw text) and data bytes, with an optional forged length. */
function fileFrom(header: unknown, data: Uint8Array | number, headerLength?: bigint): Uint8Array {
  const json = new TextEncoder().encode(typeof header === 'string' ? header : JSON.stringify(header));
  const body = typeof data === 'number' ? new Uint8Array(data) : data;
  const out = new Uint8Array(8 + json.length + body.length);
  new DataView(out.buffer).setBigUint64(0, headerLength ?? BigInt(json.length), true);
  out.set(json, 8);
  out.set(body, 8 + json.length);
  return out;
}

const f32 = (shape: number[], begin: number) => ({
  dtype: 'F32',
  shape,
  data_offsets: [begin, begin + 4 * shape.reduce((a, b) => a * b, 1)],
});

async function readAll(dir: string): Promise<Map<string, TensorData>> {
  return new Map((await readSources(dir)).map((t) => [t.name, t.data as TensorData]));
}

/** Every tensor of a checkpoint, in file order, ready to be written again. */
async function readSources(dir: string): Promise<TensorSource[]> {
  const ck = await CheckpointTensors.open(dir);
  try {
    const out: TensorSource[] = [];
    for (const name of ck.names()) out.push({ name, shape: ck.info(name)!.shape, data: await ck.read(name) });
    return out;
  } finally {
    await ck.close();
  }
}

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'safetensors-test-'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

describeWithFixtures(
  'reading the Hugging Face fixtures',
  ['hf/llama-tiny/model.safetensors', 'hf/stories260K/model.safetensors', 'hf/stories260K/fixtures.json'],
  () => {
    it('llama-tiny: every tensor F32 with its HF shape, values equal to a direct decode of the file', async () => {
      const path = join(HF, 'llama-tiny/model.safetensors');
      const file = await SafetensorsFile.open(path);
      try {
        expect(file.header.tensors).toHaveLength(21);
        expect(file.header.metadata).toEqual({ format: 'pt' });
        expect(file.info('model.embed_tokens.weight')).toMatchObject({ dtype: 'F32', shape: [256, 64] });
        expect(file.info('model.layers.1.self_attn.k_proj.weight')).toMatchObject({ dtype: 'F32', shape: [32, 64] });
        expect(file.info('lm_head.weight')).toMatchObject({ dtype: 'F32', shape: [256, 64] });
        // Independent decode: header offsets read with plain JSON.parse, floats with a DataView.
        const bytes = await readFile(path);
        const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
        const n = Number(view.getBigUint64(0, true));
        const raw = JSON.parse(bytes.subarray(8, 8 + n).toString('utf8'));
        for (const name of ['model.norm.weight', 'model.layers.0.self_attn.q_proj.weight', 'lm_head.weight']) {
          const t = await file.read(name);
          const [begin] = raw[name].data_offsets;
          for (const i of [0, 1, t.length - 1]) expect(t[i]).toBe(view.getFloat32(8 + n + begin + 4 * i, true));
        }
        const norm = await file.read('model.norm.weight');
        expect(norm.every((v) => v > 0.5 && v < 1.5)).toBe(true);
      } finally {
        await file.close();
      }
    });

    it('stories260K: the recorded file, 47 tensors, tied (no lm_head)', async () => {
      const fixtures = JSON.parse(await readFile(join(HF, 'stories260K/fixtures.json'), 'utf8'));
      const bytes = await readFile(join(HF, 'stories260K/model.safetensors'));
      expect(createHash('sha256').update(bytes).digest('hex')).toBe(fixtures.model_safetensors_sha256);
      const { header, tensors } = parseSafetensors(bytes, 'stories260K/model.safetensors');
      expect(header.tensors).toHaveLength(47);
      expect(tensors.has('lm_head.weight')).toBe(false);
      expect(header.tensors.find((t) => t.name === 'model.layers.4.mlp.gate_proj.weight')).toMatchObject({
        dtype: 'F32',
        shape: [172, 64],
      });
      expect(tensors.get('model.embed_tokens.weight')!.length).toBe(512 * 64);
      const fromFile = await readAll(join(HF, 'stories260K'));
      for (const [name, t] of tensors) expect(bits(fromFile.get(name)!)).toEqual(bits(t));
    });
  },
);

describe('writing', () => {
  // Every Hugging Face fixture transformers saved: Llama, Qwen2 (q/k/v biases, tied), Qwen3 (q/k norms, tied) and a
  // Qwen3 critic (score head).
  for (const model of ['llama-tiny', 'qwen2-tiny', 'qwen3-tiny', 'qwen3-critic-tiny']) {
    describeWithFixtures(model, [`hf/${model}/model.safetensors`], () => {
      it(`rewrites ${model} bit-identically: same header (tensors, dtypes, shapes, metadata), same data bytes`, async () => {
        const src = join(HF, model);
        const sources = await readSources(src);
        const tensors = new Map(sources.map((t) => [t.name, t.data as TensorData]));
        const dir = join(tmp, `single-${model}`);
        await mkdir(dir);
        expect(await writeCheckpointTensors(dir, sources)).toEqual(['model.safetensors']);
        const back = await readAll(dir);
        expect([...back.keys()]).toEqual([...tensors.keys()]);
        for (const [name, t] of tensors) expect(bits(back.get(name)!)).toEqual(bits(t));
        const parsed = async (path: string) => {
          const bytes = await readFile(path);
          const { header } = parseSafetensors(bytes);
          return { header, bytes: bytes.subarray(header.dataOffset), headerLength: bytes.readUInt32LE(0) };
        };
        const [ours, theirs] = [
          await parsed(join(dir, 'model.safetensors')),
          await parsed(join(src, 'model.safetensors')),
        ];
        expect(ours.header.metadata).toEqual(theirs.header.metadata);
        expect(ours.header.tensors).toEqual(theirs.header.tensors);
        expect(Buffer.compare(ours.bytes, theirs.bytes)).toBe(0);
        expect(ours.headerLength % 8).toBe(0);
      });
    });
  }

  describeWithFixtures('llama-tiny', ['hf/llama-tiny/model.safetensors'], () => {
    it(
      'shards above the size limit with an index transformers reads, and reads them back ' + 'bit-identically',
      async () => {
        const tensors = await readAll(join(HF, 'llama-tiny'));
        const dir = join(tmp, 'sharded');
        await mkdir(dir);
        const sources: TensorSource[] = [...tensors].map(([name, data]) => ({
          name,
          shape: [data.length],
          data: () => data,
        }));
        const files = await writeCheckpointTensors(dir, sources, { maxShardBytes: 100_000 });
        expect(files.at(-1)).toBe(INDEX_FILE);
        expect(files[0]).toMatch(/^model-00001-of-0000\d\.safetensors$/);
        expect(files.length).toBeGreaterThan(3);
        const index = parseShardIndex(await readFile(join(dir, INDEX_FILE), 'utf8'));
        expect(index.totalSize).toBe([...tensors.values()].reduce((s, t) => s + t.byteLength, 0));
        expect(index.weightMap.size).toBe(tensors.size);
        const back = await readAll(dir);
        for (const [name, t] of tensors) expect(bits(back.get(name)!)).toEqual(bits(t));
      },
    );
  });

  it('plans shards in order, a tensor larger than the limit alone', () => {
    const plan = planShards(
      [
        { name: 'a', shape: [10], dtype: 'F32' },
        { name: 'b', shape: [10], dtype: 'F32' },
        { name: 'big', shape: [100], dtype: 'F32' },
        { name: 'c', shape: [2], dtype: 'BF16' },
      ],
      80,
    );
    expect(plan.shards.map((s) => s.tensors.map((t) => t.name))).toEqual([['a', 'b'], ['big'], ['c']]);
    expect(plan.shards.map((s) => s.file)).toEqual([
      'model-00001-of-00003.safetensors',
      'model-00002-of-00003.safetensors',
      'model-00003-of-00003.safetensors',
    ]);
    expect(JSON.parse(plan.indexJson!).metadata.total_size).toBe(484);
    expect(planShards([{ name: 'a', shape: [10], dtype: 'F32' }]).indexJson).toBeNull();
  });

  it('stores F16, BF16, I32 and I64 and loads them as f32 / i32', () => {
    const x = randomArray(37, 3, 100);
    const ints = Int32Array.from([-5, 0, 7, 2147483647, -2147483648]);
    const bytes = serializeSafetensors([
      { name: 'h', shape: [37], dtype: 'F16', data: x },
      { name: 'b', shape: [37], dtype: 'BF16', data: x },
      { name: 'i', shape: [5], dtype: 'I32', data: ints },
      { name: 'l', shape: [5], dtype: 'I64', data: ints },
      { name: 'empty', shape: [0, 3], data: new Float32Array(0) },
    ]);
    const { header, tensors } = parseSafetensors(bytes);
    expect(header.tensors.map((t) => t.dtype)).toEqual(['F16', 'BF16', 'I32', 'I64', 'F32']);
    expect([...tensors.get('h')!]).toEqual([...x].map((v) => f16BitsToF32(f32ToF16Bits(v))));
    expect([...tensors.get('b')!]).toEqual([...x].map((v) => bf16BitsToF32(f32ToBf16Bits(v))));
    expect(tensors.get('i')).toEqual(ints);
    expect(tensors.get('l')).toEqual(ints);
    expect(tensors.get('empty')!.length).toBe(0);
  });

  it('rejects data that does not match its shape or dtype, and duplicate names', () => {
    expect(() => serializeSafetensors([{ name: 'w', shape: [2, 3], data: new Float32Array(5) }])).toThrow(
      /'w' has 5 elements, shape \[2, 3\] needs 6/,
    );
    expect(() => serializeSafetensors([{ name: 'w', shape: [2], dtype: 'I32', data: new Float32Array(2) }])).toThrow(
      /'w' holds float data but dtype is I32/,
    );
    expect(() =>
      serializeSafetensors([
        { name: 'w', shape: [1], data: new Float32Array(1) },
        { name: 'w', shape: [1], data: new Float32Array(1) },
      ]),
    ).toThrow(/duplicate or reserved tensor name 'w'/);
  });
});

describe('float conversions (round to nearest even)', () => {
  // Every finite half / bfloat16 value, the midpoints between neighbours (exact in f32: the tie goes to the
  // even mantissa), and points just either side of each midpoint.
  function checkFormat(toBits: (x: number) => number, fromBits: (h: number) => number, maxFinite: number) {
    const f = new Float32Array(1);
    const u = new Uint32Array(f.buffer);
    const nextUp = (x: number) => {
      f[0] = x;
      u[0] += x >= 0 ? 1 : -1;
      return f[0];
    };
    const nextDown = (x: number) => {
      f[0] = x;
      u[0] += x >= 0 ? -1 : 1;
      return f[0];
    };
    const wrong: string[] = [];
    const check = (x: number, expected: number) => {
      if (toBits(x) !== expected)
        wrong.push(`${x} -> 0x${toBits(x).toString(16)}, expected 0x${expected.toString(16)}`);
    };
    for (let h = 0; h < 0x8000; h++) {
      const v = fromBits(h);
      if (!Number.isFinite(v)) continue;
      check(v, h);
      check(-v, h | 0x8000);
      const upper = fromBits(h + 1);
      if (!(upper <= maxFinite)) continue;
      const mid = (v + upper) / 2;
      if (Math.fround(mid) !== mid) wrong.push(`midpoint ${mid} not exact in f32`);
      check(mid, h & 1 ? h + 1 : h);
      check(nextDown(mid), h);
      check(nextUp(mid), h + 1);
    }
    expect(wrong.slice(0, 5)).toEqual([]);
  }

  it('f16: exhaustive round trip and ties', () => {
    checkFormat(f32ToF16Bits, f16BitsToF32, 65504);
    expect(f32ToF16Bits(65520)).toBe(0x7c00); // halfway to the next binade rounds to even: infinity
    expect(f32ToF16Bits(65519.99)).toBe(0x7bff);
    expect(f32ToF16Bits(2 ** -25)).toBe(0); // tie between 0 and the smallest subnormal
    expect(f32ToF16Bits(Math.fround(2 ** -25 * 1.0001))).toBe(1);
    expect(f32ToF16Bits(1e-30)).toBe(0);
    expect(f32ToF16Bits(-Infinity)).toBe(0xfc00);
    expect(Number.isNaN(f16BitsToF32(f32ToF16Bits(NaN)))).toBe(true);
  });

  it('bf16: exhaustive round trip and ties', () => {
    checkFormat(f32ToBf16Bits, bf16BitsToF32, 3.3895313892515355e38);
    expect(f32ToBf16Bits(3.4e38)).toBe(0x7f80);
    expect(f32ToBf16Bits(Infinity)).toBe(0x7f80);
    expect(Number.isNaN(bf16BitsToF32(f32ToBf16Bits(NaN)))).toBe(true);
  });
});

describe('malformed files: each violation is its own error naming the file and tensor', () => {
  const parse = (bytes: Uint8Array) => () => parseSafetensors(bytes, 'bad.safetensors');

  it('file shorter than the 8-byte length', () => {
    expect(parse(new Uint8Array(5))).toThrow(
      /bad\.safetensors: file is 5 bytes, too short for the 8-byte header length/,
    );
  });
  it('header length beyond the file', () => {
    expect(parse(fileFrom({}, 0, 1000n))).toThrow(
      /bad\.safetensors: header length 1000 runs past the end of the 10-byte file/,
    );
  });
  it('header length above the sane bound', () => {
    expect(parse(fileFrom({}, 0, BigInt(MAX_HEADER_BYTES) + 1n))).toThrow(
      /header length 100000001 is above the 100000000-byte bound/,
    );
  });
  it('invalid JSON', () => {
    expect(parse(fileFrom('{"w": {"dtype": "F32",', 0))).toThrow(/bad\.safetensors: header is not valid UTF-8 JSON/);
  });
  it('a header that is not an object', () => {
    expect(parse(fileFrom('[1, 2]', 0))).toThrow(/header is not a JSON object/);
  });
  it.each(['dtype', 'shape', 'data_offsets'])('a tensor entry without %s', (key) => {
    const entry: Record<string, unknown> = f32([2], 0);
    delete entry[key];
    expect(parse(fileFrom({ 'layer.w': entry }, 8))).toThrow(
      new RegExp(`bad\\.safetensors: tensor 'layer\\.w': header entry has no '${key}'`),
    );
  });
  it('unknown and unsupported dtypes', () => {
    expect(parse(fileFrom({ w: { dtype: 'Q7', shape: [2], data_offsets: [0, 8] } }, 8))).toThrow(
      /tensor 'w': unknown dtype Q7 \(supported: F32, F16, BF16, I32, I64\)/,
    );
    expect(parse(fileFrom({ w: { dtype: 'F64', shape: [1], data_offsets: [0, 8] } }, 8))).toThrow(
      /tensor 'w': unsupported dtype F64/,
    );
  });
  it('a shape that is not a list of non-negative integers', () => {
    expect(parse(fileFrom({ w: { dtype: 'F32', shape: [2, -1], data_offsets: [0, 8] } }, 8))).toThrow(
      /tensor 'w': shape \[2,-1\] is not a list of non-negative integers/,
    );
  });
  it('malformed data_offsets', () => {
    expect(parse(fileFrom({ w: { dtype: 'F32', shape: [2], data_offsets: [8, 0] } }, 8))).toThrow(
      /tensor 'w': data_offsets \[8,0\] is not \[begin, end\]/,
    );
  });
  it('byte count != product(shape) * dtype size', () => {
    expect(parse(fileFrom({ w: { dtype: 'BF16', shape: [2, 3], data_offsets: [0, 24] } }, 24))).toThrow(
      /tensor 'w': 24 bytes in data_offsets, but shape \[2, 3\] of BF16 needs 12/,
    );
  });
  it('offsets past the data section', () => {
    expect(parse(fileFrom({ a: f32([2], 0), b: f32([4], 8) }, 16))).toThrow(
      /tensor 'b': data_offsets \[8, 24\] run past the 16-byte data section/,
    );
  });
  it('overlapping tensors', () => {
    expect(parse(fileFrom({ a: f32([4], 0), b: f32([2], 8) }, 24))).toThrow(
      /tensor 'b': bytes \[8, 16\) overlap tensor 'a' which ends at 16/,
    );
  });
  it('a gap between tensors', () => {
    expect(parse(fileFrom({ a: f32([2], 0), b: f32([2], 12) }, 20))).toThrow(
      /tensor 'b': starts at 12 but the previous tensor 'a' ends at 8/,
    );
  });
  it('bytes after the last tensor', () => {
    expect(parse(fileFrom({ a: f32([2], 0) }, 12))).toThrow(
      /bad\.safetensors: 4 bytes after the last tensor are not described by the header/,
    );
  });
  it('__metadata__ that is not a string map', () => {
    expect(parse(fileFrom({ __metadata__: { step: 3 } }, 0))).toThrow(
      /__metadata__ is not a map of strings to strings/,
    );
  });
  it('an I64 value that does not fit in i32', () => {
    const data = new Uint8Array(new BigInt64Array([5n, 1n << 40n]).buffer);
    expect(parse(fileFrom({ ids: { dtype: 'I64', shape: [2], data_offsets: [0, 16] } }, data))).toThrow(
      /tensor 'ids': I64 element 1 = 1099511627776 does not fit in i32/,
    );
  });
  it('a file truncated after its header was written', async () => {
    const whole = serializeSafetensors([{ name: 'w', shape: [4], data: new Float32Array(4) }]);
    const path = join(tmp, 'truncated.safetensors');
    await writeFile(path, whole.subarray(0, whole.length - 4));
    await expect(SafetensorsFile.open(path)).rejects.toThrow(
      /truncated\.safetensors: 4 bytes after|run past the 12-byte data section/,
    );
  });
});

describe('malformed sharded checkpoints', () => {
  async function shardedDir(name: string, index: unknown, shards: Record<string, Uint8Array>): Promise<string> {
    const dir = join(tmp, name);
    await mkdir(dir);
    await writeFile(join(dir, INDEX_FILE), typeof index === 'string' ? index : JSON.stringify(index));
    for (const [file, bytes] of Object.entries(shards)) await writeFile(join(dir, file), bytes);
    return dir;
  }
  const shard = (...names: string[]) =>
    serializeSafetensors(names.map((name) => ({ name, shape: [2], data: new Float32Array(2) })));

  it('index that is not valid JSON', async () => {
    const dir = await shardedDir('bad-json', '{"weight_map": ', {});
    await expect(CheckpointTensors.open(dir)).rejects.toThrow(/model\.safetensors\.index\.json: not valid JSON/);
  });
  it('index without weight_map', async () => {
    const dir = await shardedDir('no-map', { metadata: {} }, {});
    await expect(CheckpointTensors.open(dir)).rejects.toThrow(/'weight_map' is undefined, expected an object/);
  });
  it('index pointing at a missing shard', async () => {
    const dir = await shardedDir(
      'missing-shard',
      { weight_map: { a: 's1.safetensors', b: 's2.safetensors' } },
      { 's1.safetensors': shard('a') },
    );
    await expect(CheckpointTensors.open(dir)).rejects.toThrow(
      /tensor 'b' is mapped to shard s2\.safetensors, which does not exist/,
    );
  });
  it('index pointing outside the directory', async () => {
    const dir = await shardedDir('traversal', { weight_map: { a: '../a.safetensors' } }, {});
    await expect(CheckpointTensors.open(dir)).rejects.toThrow(
      /tensor 'a': weight_map entry "\.\.\/a\.safetensors" is not a file name in the checkpoint directory/,
    );
  });
  it('the same tensor in two shards', async () => {
    const dir = await shardedDir(
      'duplicate',
      { weight_map: { a: 's1.safetensors', b: 's2.safetensors' } },
      { 's1.safetensors': shard('a'), 's2.safetensors': shard('b', 'a') },
    );
    await expect(CheckpointTensors.open(dir)).rejects.toThrow(
      /tensor 'a' appears in both .*s1\.safetensors and .*s2\.safetensors/,
    );
  });
  it('a shard holding a tensor the index does not list', async () => {
    const dir = await shardedDir(
      'unlisted',
      { weight_map: { a: 's1.safetensors' } },
      { 's1.safetensors': shard('a', 'extra') },
    );
    await expect(CheckpointTensors.open(dir)).rejects.toThrow(
      /s1\.safetensors: holds tensor 'extra', which model\.safetensors\.index\.json does not list/,
    );
  });
  it('an index entry whose shard lacks the tensor', async () => {
    const dir = await shardedDir(
      'absent',
      { weight_map: { a: 's1.safetensors', b: 's1.safetensors' } },
      { 's1.safetensors': shard('a') },
    );
    await expect(CheckpointTensors.open(dir)).rejects.toThrow(
      /tensor 'b' is mapped to s1\.safetensors, which does not contain it/,
    );
  });
  it('a directory with no safetensors at all', async () => {
    await expect(CheckpointTensors.open(tmp)).rejects.toThrow(
      /neither model\.safetensors nor model\.safetensors\.index\.json found/,
    );
  });
});
