// A batch of token sequences on the GPU, as every model pass consumes it: ids, the key mask (1 = real token) and
// position ids, all [B·T] row-major. Left padding gets positions from the mask (cumsum(mask) − 1, pads set to 1,
// as Hugging Face generate() and RLHF trainers do) unless explicit positions are given.
import type { Engine, Tensor } from '../engine/index.ts';
import { buildTokenIndex } from '../kernels/layers/embedding.ts';

export interface HostTokenBatch {
  inputIds: readonly (readonly number[])[];
  attentionMask: readonly (readonly number[])[];
  positionIds?: readonly (readonly number[])[];
}

export interface TokenBatch {
  B: number;
  T: number;
  ids: Tensor<'u32'>;
  positions: Tensor<'i32'>;
  keyMask: Tensor<'u32'>;
  /** Host copy of the ids, for the embedding backward's token index. */
  hostIds: Uint32Array;
  vocabSize: number;
}

export function positionsFromMask(mask: readonly number[]): number[] {
  let seen = 0;
  return mask.map((m) => {
    if (m) return seen++;
    return 1;
  });
}

export function checkRectangular(name: string, rows: readonly (readonly number[])[], B: number, T: number): void {
  if (rows.length !== B) throw new Error(`${name}: ${rows.length} rows, expected ${B}`);
  rows.forEach((row, b) => {
    if (row.length !== T) throw new Error(`${name}[${b}]: length ${row.length}, expected ${T}`);
  });
}

/** The host batch as the flat (B·T) arrays the GPU holds: ids, key mask, positions. */
export function tokenArrays(
  host: HostTokenBatch,
  vocabSize: number,
): { B: number; T: number; ids: Uint32Array; mask: Uint32Array; positions: Int32Array } {
  const B = host.inputIds.length;
  const T = B > 0 ? host.inputIds[0].length : 0;
  checkRectangular('input_ids', host.inputIds, B, T);
  checkRectangular('attention_mask', host.attentionMask, B, T);
  if (host.positionIds) checkRectangular('position_ids', host.positionIds, B, T);
  const ids = new Uint32Array(B * T);
  const mask = new Uint32Array(B * T);
  const positions = new Int32Array(B * T);
  for (let b = 0; b < B; b++) {
    const rowPositions = host.positionIds?.[b] ?? positionsFromMask(host.attentionMask[b]);
    for (let t = 0; t < T; t++) {
      const id = host.inputIds[b][t];
      if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
        throw new Error(`input_ids[${b}][${t}] = ${id} is outside the vocabulary [0, ${vocabSize})`);
      }
      ids[b * T + t] = id;
      mask[b * T + t] = host.attentionMask[b][t] ? 1 : 0;
      positions[b * T + t] = rowPositions[t];
    }
  }
  return { B, T, ids, mask, positions };
}

/** Uploads a host batch; with `reuse` of the same shape, writes into its buffers instead of allocating. */
export function uploadTokenBatch(
  engine: Engine,
  host: HostTokenBatch,
  vocabSize: number,
  label = 'batch',
  reuse?: TokenBatch,
): TokenBatch {
  const { B, T, ids, mask, positions } = tokenArrays(host, vocabSize);
  if (reuse && reuse.B === B && reuse.T === T) {
    engine.upload(reuse.ids, ids);
    engine.upload(reuse.positions, positions);
    engine.upload(reuse.keyMask, mask);
    return { ...reuse, hostIds: ids, vocabSize };
  }
  return {
    B,
    T,
    ids: engine.tensorFrom(`${label}.ids`, [B * T], ids, 'u32'),
    positions: engine.tensorFrom(`${label}.positions`, [B * T], positions, 'i32'),
    keyMask: engine.tensorFrom(`${label}.mask`, [B * T], mask, 'u32'),
    hostIds: ids,
    vocabSize,
  };
}

export function destroyTokenBatch(engine: Engine, batch: TokenBatch): void {
  engine.destroyTensor(batch.ids);
  engine.destroyTensor(batch.positions);
  engine.destroyTensor(batch.keyMask);
}

/** The embedding backward's token index (positions grouped by id, and each entry's id), uploaded: 2N u32. */
export function uploadTokenIndex(
  engine: Engine,
  hostIds: Uint32Array,
  vocabSize: number,
): { ids: Tensor<'u32'>; positions: Tensor<'u32'> } {
  const index = buildTokenIndex(hostIds, vocabSize);
  return {
    ids: engine.tensorFrom('token-index.ids', [index.ids.length], index.ids, 'u32'),
    positions: engine.tensorFrom('token-index.positions', [index.positions.length], index.positions, 'u32'),
  };
}
