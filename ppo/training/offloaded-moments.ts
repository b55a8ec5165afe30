// verl's fsdp_config.optimizer_offload: AdamW's moments (float32, or AdamW8bit's codes and block scales) live in host
// memory, and each update streams them through one small device staging buffer. A fill packs runs of tensors'
// values ("pieces") into the staging buffer: their moments are uploaded, the same kernels the resident optimizer runs
// update those runs of the parameters, and the moments are read back into the host arrays. Both kernels are
// elementwise or per 256-value block, so cutting a tensor into runs (whole blocks under AdamW8bit) and updating it run
// by run gives the resident update bit for bit (the arena's alignment padding between tensors, which the resident
// optimizer updates with zero gradients and zero moments, stays zero untouched). Two fills are in flight at once:
// the queue orders fill k + 1's uploads after fill k's copy out, so one staging buffer serves both while the host
// waits for fill k's read.
import { type Arena, type ArenaEntry, type Engine, Tensor, elementCount, partRanges } from '../../engine/index.ts';
import { adamwStep, type AdamwHyperparameters } from '../../kernels/optim/adamw.ts';
import { adamw8bitSizes, adamw8bitStep } from '../../kernels/optim/adamw8bit.ts';
import { OPTIMIZER_8BIT_BLOCK } from '../../engine/dynamic-map.ts';
import type { QuantizedMoments } from './adamw-optimizer.ts';

/**
 * The staging buffer's size unless a test asks for less: 0.25% of Qwen3-1.7B's 12.8 GiB of float32 moments, a
 * quarter of WebGPU's default 128 MiB binding (bindable on every device and in a browser), and large enough that
 * a fill's fixed cost (one submit and one buffer map, well under a millisecond on a GPU) is small next to moving its
 * 2 × 32 MiB over PCIe (a few milliseconds), which the next fill's upload overlaps.
 */
export const OFFLOAD_STAGING_BYTES = 32 * 2 ** 20;

/** Staging regions start on 256-byte boundaries: the largest minStorageBufferOffsetAlignment WebGPU allows. */
const ALIGN_WORDS = 64;
const alignUp = (words: number) => Math.ceil(words / ALIGN_WORDS) * ALIGN_WORDS;

/** Aligned staging words of each moment region of a run of `count` values: m and v (float32 moments, padded to
 *  whole vec4s), or state1, state2, absmax1, absmax2 (8-bit). */
export function pieceWords(count: number, eightBit: boolean): number[] {
  if (!eightBit) return [alignUp(Math.ceil(count / 4) * 4), alignUp(Math.ceil(count / 4) * 4)];
  const { words, blocks } = adamw8bitSizes(count);
  return [alignUp(words), alignUp(words), alignUp(blocks), alignUp(blocks)];
}

/** Bytes of the staging buffer for these trained tensors: all their moments when they take less than `limitBytes`
 *  (one fill), else `limitBytes` rounded down to whole aligned regions. */
export function stagingBytes(entries: readonly ArenaEntry[], eightBit: ReadonlySet<string>, limitBytes: number) {
  const total = entries.reduce(
    (sum, e) => sum + pieceWords(elementCount(e.shape), eightBit.has(e.name)).reduce((a, b) => a + b, 0),
    0,
  );
  return Math.min(total, Math.floor(limitBytes / 4 / ALIGN_WORDS) * ALIGN_WORDS) * 4;
}

/** Values [start, start + count) of tensor `name` (within one of its parts), staged at `at` (word offsets of its
 *  regions, in pieceWords' order). */
interface Piece {
  name: string;
  start: number;
  count: number;
  eightBit: boolean;
  at: number[];
}

interface Fill {
  pieces: Piece[];
  /** Staging words this fill uses. */
  words: number;
}

/** Most values of a run (from `remaining`) whose regions fit `free` words: whole vec4s of float32 moments, whole
 *  256-value blocks of 8-bit ones unless the run ends the tensor. 0 when not even one quantum fits. */
function valuesThatFit(free: number, remaining: number, eightBit: boolean): number {
  const fits = (count: number) => pieceWords(count, eightBit).reduce((a, b) => a + b, 0) <= free;
  if (fits(remaining)) return remaining;
  const quantum = eightBit ? OPTIMIZER_8BIT_BLOCK : ALIGN_WORDS;
  let [low, high] = [0, Math.floor(remaining / quantum)];
  while (low < high) {
    const mid = Math.ceil((low + high) / 2);
    if (fits(mid * quantum)) low = mid;
    else high = mid - 1;
  }
  return low * quantum;
}

export class OffloadedMoments {
  /** The moments by tensor name, in host memory: the resident optimizer's saved state, kept. */
  readonly m = new Map<string, Float32Array>();
  readonly v = new Map<string, Float32Array>();
  readonly quantized = new Map<string, QuantizedMoments>();
  readonly staging: Tensor<'f32'>;
  private readonly fills: Fill[] = [];

  constructor(
    private readonly engine: Engine,
    private readonly params: Arena,
    private readonly grads: Arena,
    /** Tensors with 8-bit moments (AdamW8bit, ≥ MIN_8BIT_SIZE values); the others' are float32. */
    private readonly eightBit: ReadonlySet<string>,
    /** AdamW8bit decays after the step for its float32 tensors too (bitsandbytes); torch's AdamW before. */
    private readonly decay: 'before' | 'after',
    /** The staging buffer's size (stagingBytes). */
    bytes: number,
  ) {
    for (const name of params.names()) {
      const n = params.get(name).size;
      if (!eightBit.has(name)) {
        this.m.set(name, new Float32Array(n));
        this.v.set(name, new Float32Array(n));
        continue;
      }
      const { words, blocks } = adamw8bitSizes(n);
      this.quantized.set(name, {
        state1: new Uint32Array(words),
        state2: new Uint32Array(words),
        absmax1: new Float32Array(blocks),
        absmax2: new Float32Array(blocks),
      });
    }
    this.staging = engine.tensor(`${params.label}.adam_staging`, [bytes / 4]);
    this.plan(bytes / 4);
  }

  /** Packs every tensor's runs into fills, in the arena's order; a run never crosses a part of a split tensor. */
  private plan(capacity: number): void {
    let fill: Fill = { pieces: [], words: 0 };
    for (const name of this.params.names()) {
      const eightBit = this.eightBit.has(name);
      for (const part of partRanges(this.params.get(name))) {
        if (eightBit && part.first % OPTIMIZER_8BIT_BLOCK !== 0)
          throw new Error(
            `optimizer offload: ${name} is split across buffers at value ${part.first}, inside an 8-bit block of ` +
              `${OPTIMIZER_8BIT_BLOCK}`,
          );
        const end = part.first + part.tensor.size;
        for (let start = part.first; start < end; ) {
          let count = valuesThatFit(capacity - fill.words, end - start, eightBit);
          if (count === 0) {
            if (fill.pieces.length === 0)
              throw new Error(`optimizer offload: a staging buffer of ${capacity * 4} bytes holds no run of ${name}`);
            this.fills.push(fill);
            fill = { pieces: [], words: 0 };
            count = valuesThatFit(capacity, end - start, eightBit);
          }
          const at: number[] = [];
          for (const words of pieceWords(count, eightBit)) {
            at.push(fill.words);
            fill.words += words;
          }
          fill.pieces.push({ name, start, count, eightBit, at });
          start += count;
        }
      }
    }
    if (fill.pieces.length > 0) this.fills.push(fill);
  }

  /** Zero moments everywhere: a new optimizer's. */
  reset(): void {
    for (const moments of [...this.m.values(), ...this.v.values()]) moments.fill(0);
    for (const q of this.quantized.values()) for (const part of Object.values(q)) part.fill(0);
  }

  /** One update of every tensor, fill by fill; `qmap` (AdamW8bit): the two dynamic codes. */
  async step(hyper: AdamwHyperparameters & { normSquared: Tensor }, qmap: Tensor | null): Promise<void> {
    const inFlight: Promise<void>[] = [];
    try {
      for (const fill of this.fills) {
        for (const piece of fill.pieces) this.upload(piece);
        for (const piece of fill.pieces) this.dispatch(piece, hyper, qmap);
        inFlight.push(
          this.engine.read(this.staging.view(`${this.staging.name}[0:${fill.words}]`, 0, [fill.words])).then((data) => {
            for (const piece of fill.pieces) this.download(piece, data);
          }),
        );
        if (inFlight.length === 2) await inFlight.shift();
      }
      await Promise.all(inFlight);
    } finally {
      // A failed read leaves the other fill's read awaited, not an unhandled rejection.
      await Promise.allSettled(inFlight);
    }
  }

  /** The staging regions of a piece, as the kernels bind them. */
  private regions(piece: Piece): Tensor[] {
    const { words, blocks } = adamw8bitSizes(piece.count);
    const sizes = piece.eightBit ? [words, words, blocks, blocks] : [4 * words, 4 * words];
    return piece.at.map((at, i) => {
      const view = this.staging.view(`${this.staging.name}:${piece.name}[${piece.start}]#${i}`, at, [sizes[i]]);
      // state1 and state2 hold u32 code words.
      return piece.eightBit && i < 2 ? new Tensor(view.name, view.buffer, view.byteOffset, view.shape, 'u32') : view;
    });
  }

  /** The host arrays a piece's regions hold, cut to the piece's values. */
  private hostRuns(piece: Piece): (Float32Array | Uint32Array)[] {
    const { name, start, count } = piece;
    if (!piece.eightBit) return [this.m.get(name)!, this.v.get(name)!].map((a) => a.subarray(start, start + count));
    const q = this.quantized.get(name)!;
    const words = [start / 4, start / 4 + Math.ceil(count / 4)];
    const blocks = [
      start / OPTIMIZER_8BIT_BLOCK,
      start / OPTIMIZER_8BIT_BLOCK + Math.ceil(count / OPTIMIZER_8BIT_BLOCK),
    ];
    return [
      q.state1.subarray(...words),
      q.state2.subarray(...words),
      q.absmax1.subarray(...blocks),
      q.absmax2.subarray(...blocks),
    ];
  }

  private upload(piece: Piece): void {
    const runs = this.hostRuns(piece);
    this.regions(piece).forEach((region, i) => {
      const run = runs[i];
      if (run.length === region.size) {
        this.engine.upload(region, run);
        return;
      }
      // A float32 run ending mid-vec4: its padding moments are zero, as the resident arena's (nothing writes them).
      this.engine.upload(region.view(region.name, 0, [run.length]), run);
      this.engine.clear(region.view(`${region.name}:pad`, run.length, [region.size - run.length]));
    });
  }

  private download(piece: Piece, staged: Float32Array): void {
    const runs = this.hostRuns(piece);
    piece.at.forEach((at, i) => {
      const run = runs[i];
      // Same-type copies move bytes: the u32 codes and every float (NaN payloads included) come back unchanged.
      if (run instanceof Uint32Array) run.set(new Uint32Array(staged.buffer, staged.byteOffset + at * 4, run.length));
      else run.set(staged.subarray(at, at + run.length));
    });
  }

  private dispatch(piece: Piece, hyper: AdamwHyperparameters & { normSquared: Tensor }, qmap: Tensor | null): void {
    const padded = Math.ceil(piece.count / 4) * 4;
    const run = (arena: Arena) => {
      const tensor = arena.get(piece.name);
      const part = partRanges(tensor).find((p) => piece.start >= p.first && piece.start < p.first + p.tensor.size)!;
      return part.tensor.view(`${tensor.name}[${piece.start}:]`, piece.start - part.first, [padded]);
    };
    const [params, grads] = [run(this.params), run(this.grads)];
    const regions = this.regions(piece);
    if (!piece.eightBit) {
      adamwStep(this.engine, { params, grads, m: regions[0], v: regions[1], ...hyper, decay: this.decay });
      return;
    }
    const [state1, state2, absmax1, absmax2] = regions;
    adamw8bitStep(this.engine, {
      ...{ params, grads, state1, state2, absmax1, absmax2, qmap: qmap!, count: piece.count },
      ...hyper,
    });
  }
}
