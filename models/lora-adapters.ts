// LoRA adapters on the device (models/lora.ts has the table, PEFT names and layouts): their own parameter arena,
// and the two matmuls each adapted projection adds to the base one, forward and backward. The base weights get no
// gradient: the trunk skips their weight-gradient matmuls (LoRA's speed win), and dX flows through W and the adapter.
import { Arena, elementCount, type ArenaEntry, type ArenaLayout, type Engine, type Tensor } from '../engine/index.ts';
import { matmul, type MatmulPrologue } from '../kernels/matmul/matmul.ts';
import { clearRanges, rangeTable, type RangeTable } from '../kernels/util/clear-ranges.ts';
import type { DecoderConfig } from './hf-config.ts';
import {
  loraEntries,
  loraProjections,
  loraScaling,
  offBlockRanges,
  stackedRank,
  type LoraProjection,
  type LoraSettings,
  type ProjectionKind,
} from './lora.ts';
import { uploadArenaTensors } from './parameter-store.ts';

/** The A operand of a projection: its input, or the input before an op the matmul folds in (decode steps). */
export interface ProjectionInput {
  a: Tensor;
  prologue?: MatmulPrologue;
}

export class LoraAdapters {
  readonly params: Arena;
  readonly scaling: number;
  private readonly byKey = new Map<string, LoraProjection>();
  /** Bᵀ's off-block entries as word ranges of each arena segment holding some (see clearOffBlockGradients). */
  private readonly offBlock: { segment: number; ranges: Tensor<'u32'>; table: RangeTable }[];

  constructor(
    private readonly engine: Engine,
    readonly config: DecoderConfig,
    readonly settings: LoraSettings,
    values: ReadonlyMap<string, Float32Array>,
    label: string,
    /** Base tensors that train beside the adapters (PEFT's modules_to_save: a critic's `score` head), held in this
     *  arena so one optimizer and one gradient arena cover both; their values come in `values` too. */
    readonly modulesToSave: readonly ArenaEntry[] = [],
  ) {
    this.params = new Arena(
      engine,
      `${label}.lora`,
      Arena.plan(engine, [...loraEntries(config, settings), ...modulesToSave]),
    );
    uploadArenaTensors(engine, this.params, values);
    this.scaling = loraScaling(settings);
    for (const p of loraProjections(config, settings)) this.byKey.set(`${p.layer}.${p.kind}`, p);
    this.offBlock = offBlockTables(engine, this.params.layout, [...this.byKey.values()], settings, this.params.label);
  }

  private projection(layer: number, kind: ProjectionKind): LoraProjection | undefined {
    return this.byKey.get(`${layer}.${kind}`);
  }

  /** Frees the adapters' buffers (a server unloading or replacing an adapter). */
  destroy(): void {
    for (const t of [...this.params.buffers, ...this.offBlock.map((o) => o.ranges)]) this.engine.destroyTensor(t);
  }

  /** Columns of a projection's low-rank activation x·Aᵀ (0: not adapted). */
  rankOf(layer: number, kind: ProjectionKind): number {
    const p = this.projection(layer, kind);
    return p ? stackedRank(p, this.settings) : 0;
  }

  /** The widest low-rank activation of any projection (the backward's shared scratch). */
  get maxRank(): number {
    return Math.max(...[...this.byKey.values()].map((p) => stackedRank(p, this.settings)));
  }

  /** out (M, out) += scaling·(x·Aᵀ)·Bᵀ, keeping u = x·Aᵀ (M, n·r) for backward; out null: only u (backward's
   *  recomputation of a checkpointed layer). No-op for an unadapted projection. */
  forward(layer: number, kind: ProjectionKind, input: ProjectionInput, u: Tensor, out: Tensor | null, M: number): void {
    const p = this.projection(layer, kind);
    if (!p) return;
    const w = stackedRank(p, this.settings);
    matmul(this.engine, { ...input, b: this.params.get(p.a), out: u, M, N: w, K: p.inFeatures, layout: 'nt' });
    if (out)
      matmul(this.engine, {
        a: u,
        b: this.params.get(p.bT),
        out,
        M,
        N: p.outFeatures,
        K: w,
        layout: 'nn',
        alpha: this.scaling,
        accumulate: true,
      });
  }

  /**
   * Backward of forward() given dOut (M, out): adds dBᵀ and dA into `grads` (this arena's layout) and the
   * adapter's share of dX (M, in) into dX, which must already hold the base projection's dX·W.
   * `du` is scratch of at least M·maxRank elements.
   */
  backward(
    layer: number,
    kind: ProjectionKind,
    a: { x: Tensor; u: Tensor; dOut: Tensor; dX: Tensor; du: Tensor; grads: Arena; M: number },
  ): void {
    const p = this.projection(layer, kind);
    if (!p) return;
    const e = this.engine;
    const { x, u, dOut, dX, du, grads, M } = a;
    const w = stackedRank(p, this.settings);
    matmul(e, {
      a: u,
      b: dOut,
      out: grads.get(p.bT),
      M: w,
      N: p.outFeatures,
      K: M,
      layout: 'tn',
      alpha: this.scaling,
      accumulate: true,
    });
    matmul(e, {
      a: dOut,
      b: this.params.get(p.bT),
      out: du,
      M,
      N: w,
      K: p.outFeatures,
      layout: 'nt',
      alpha: this.scaling,
    });
    matmul(e, { a: du, b: x, out: grads.get(p.a), M: w, N: p.inFeatures, K: M, layout: 'tn', accumulate: true });
    matmul(e, { a: du, b: this.params.get(p.a), out: dX, M, N: p.inFeatures, K: w, layout: 'nn', accumulate: true });
  }

  /** Zeroes the gradients of Bᵀ's off-block entries (models/lora.ts), before the gradient norm and the update: one
   *  dispatch per arena segment instead of a clear per range (one range per adapter row, ~40 per layer at rank 8). */
  clearOffBlockGradients(grads: Arena): void {
    if (grads.layout !== this.params.layout) {
      throw new Error(
        `LoRA ${this.params.label}: clearOffBlockGradients got ${grads.label}, whose layout is not the adapters'; ` +
          `expected a gradient arena built on adapters.params.layout`,
      );
    }
    for (const t of this.offBlock)
      clearRanges(this.engine, { data: grads.segments[t.segment], ranges: t.ranges, table: t.table });
  }

  /** The adapters' current values by arena name. */
  async read(): Promise<Map<string, Float32Array>> {
    const values = new Map<string, Float32Array>();
    for (const name of this.params.names()) values.set(name, await this.engine.read(this.params.get(name)));
    return values;
  }
}

/** The off-block ranges of every projection's Bᵀ as word ranges within the layout's segments, one table per segment
 *  (a Bᵀ larger than one binding spans several: its ranges are cut at their bounds). */
function offBlockTables(
  engine: Engine,
  layout: ArenaLayout,
  projections: readonly LoraProjection[],
  s: LoraSettings,
  label: string,
) {
  const bySegment = new Map<number, [number, number][]>();
  for (const p of projections) {
    const slot = layout.slots.find((x) => x.name === p.bT)!;
    const rowWords = elementCount(slot.shape) / slot.shape[0];
    for (const [start, end] of offBlockRanges(p, s)) {
      for (const part of slot.parts) {
        // The range's words in this part's buffer (a Bᵀ above maxBufferSize spans several).
        const shift = part.offset - part.firstRow * rowWords;
        const [first, last] = [part.offset, part.offset + part.rows * rowWords];
        layout.segments.forEach((segment, i) => {
          if (segment.buffer !== part.buffer) return;
          const lo = Math.max(start + shift, first, segment.offset);
          const hi = Math.min(end + shift, last, segment.offset + segment.size);
          if (lo < hi) bySegment.set(i, [...(bySegment.get(i) ?? []), [lo - segment.offset, hi - segment.offset]]);
        });
      }
    }
  }
  return [...bySegment].map(([segment, ranges]) => {
    const table = rangeTable(ranges, layout.segments[segment].size, `${label} off-block`);
    return {
      segment,
      table,
      ranges: engine.tensorFrom(`${label}.off-block#${segment}`, [table.pairs.length], table.pairs, 'u32'),
    };
  });
}
