// One arena for many tensors: a layout assigns each named tensor a device-aligned offset, packing them into
// as few buffers as the device's binding limit allows. Parameters, gradients and both AdamW moments are four
// instances of one layout, so a flat kernel (AdamW, gradient norm) walks the same segments of each.
import type { Engine } from './engine.ts';
import { Tensor, elementCount, BYTES_PER_ELEMENT, shapeString } from './tensor.ts';

export interface ArenaEntry {
  name: string;
  shape: readonly number[];
}

export interface ArenaSlot {
  name: string;
  shape: readonly number[];
  segment: number;
  /** Element offset inside the segment. */
  offset: number;
}

export interface ArenaLayout {
  slots: ArenaSlot[];
  /** Elements per segment (each segment is one buffer, bindable whole). */
  segmentSizes: number[];
}

export function planArena(entries: readonly ArenaEntry[], maxSegmentBytes: number, alignBytes: number): ArenaLayout {
  const alignElements = Math.max(1, alignBytes / BYTES_PER_ELEMENT);
  const maxElements = Math.floor(maxSegmentBytes / BYTES_PER_ELEMENT);
  const slots: ArenaSlot[] = [];
  const segmentSizes: number[] = [0];
  const seen = new Set<string>();
  for (const entry of entries) {
    if (seen.has(entry.name)) throw new Error(`arena: tensor ${entry.name} listed twice`);
    seen.add(entry.name);
    const size = elementCount(entry.shape);
    if (size > maxElements) {
      throw new Error(`arena: tensor ${entry.name} ${shapeString(entry.shape)} needs ${size * BYTES_PER_ELEMENT} bytes, ` +
        `above the device's per-binding limit of ${maxSegmentBytes} bytes`);
    }
    let segment = segmentSizes.length - 1;
    let offset = Math.ceil(segmentSizes[segment] / alignElements) * alignElements;
    if (offset + size > maxElements) {
      segmentSizes.push(0);
      segment++;
      offset = 0;
    }
    slots.push({ name: entry.name, shape: entry.shape, segment, offset });
    segmentSizes[segment] = offset + size;
  }
  return { slots, segmentSizes: segmentSizes.map((s) => Math.ceil(s / alignElements) * alignElements) };
}

/** One instance of a layout: real buffers and a tensor per slot. */
export class Arena {
  readonly segments: Tensor<'f32'>[];
  private readonly byName = new Map<string, Tensor<'f32'>>();

  constructor(engine: Engine, readonly label: string, readonly layout: ArenaLayout) {
    this.segments = layout.segmentSizes.map((size, i) => engine.tensor(`${label}#${i}`, [size]));
    for (const slot of layout.slots) {
      this.byName.set(slot.name, this.segments[slot.segment].view(`${label}:${slot.name}`, slot.offset, slot.shape));
    }
  }

  static plan(engine: Engine, entries: readonly ArenaEntry[]): ArenaLayout {
    const limit = Math.min(engine.caps.maxStorageBufferBindingSize, engine.caps.maxBufferSize);
    return planArena(entries, limit, engine.caps.minStorageBufferOffsetAlignment);
  }

  get(name: string): Tensor<'f32'> {
    const t = this.byName.get(name);
    if (!t) throw new Error(`arena ${this.label}: no tensor named ${name}`);
    return t;
  }

  has(name: string): boolean {
    return this.byName.has(name);
  }

  names(): string[] {
    return [...this.byName.keys()];
  }

  get totalElements(): number {
    return this.layout.segmentSizes.reduce((a, b) => a + b, 0);
  }
}
