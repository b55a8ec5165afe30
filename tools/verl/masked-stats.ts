// verl's masked statistics (verl.utils.torch_functional) on plain arrays, through kernels/ppo/masked-stats.
import type { Engine } from '../../engine/index.ts';
import { maskedMomentsGpu, maskedRowSumsGpu, maskedWhitenGpu } from '../../kernels/ppo/masked-stats.ts';
import { checkUnbiasedCount } from '../../ppo/algorithm/advantage-estimators.ts';
import { flatten, readMatrix, sameShape, shapeOf, upload, type Matrix } from './tensors.ts';

async function moments(engine: Engine, values: Matrix, mask: Matrix): Promise<Float32Array> {
  sameShape('mask', mask, shapeOf('values', values));
  const stats = engine.tensor('stats', [4]);
  maskedMomentsGpu(engine, upload(engine, 'values', values), upload(engine, 'mask', mask), stats);
  return engine.read(stats);
}

export async function maskedSum(engine: Engine, values: Matrix, mask: Matrix): Promise<number> {
  return (await moments(engine, values, mask))[0];
}

export async function maskedMean(engine: Engine, values: Matrix, mask: Matrix): Promise<number> {
  return (await moments(engine, values, mask))[2];
}

export async function maskedVar(engine: Engine, values: Matrix, mask: Matrix, unbiased = true): Promise<number> {
  if (unbiased) checkUnbiasedCount(flatten(mask));
  const [, count, , variance] = await moments(engine, values, mask);
  return unbiased ? variance : (variance * (count - 1)) / count;
}

/** Row-wise (axis=-1) masked sums and means. */
export async function maskedRowSums(
  engine: Engine,
  values: Matrix,
  mask: Matrix,
): Promise<{ sum: number[]; mean: number[] }> {
  const { B, T } = shapeOf('values', values);
  sameShape('mask', mask, { B, T });
  const sums = engine.tensor('row_sums', [B, 2]);
  maskedRowSumsGpu(engine, {
    values: upload(engine, 'values', values),
    mask: upload(engine, 'mask', mask),
    sums,
    B,
    T,
  });
  const out = await engine.read(sums);
  return {
    sum: Array.from({ length: B }, (_, b) => out[2 * b]),
    mean: Array.from({ length: B }, (_, b) => out[2 * b + 1]),
  };
}

export async function maskedWhiten(
  engine: Engine,
  values: Matrix,
  mask: Matrix,
  shiftMean = true,
): Promise<number[][]> {
  const { B, T } = shapeOf('values', values);
  sameShape('mask', mask, { B, T });
  checkUnbiasedCount(flatten(mask));
  const v = upload(engine, 'values', values);
  maskedWhitenGpu(engine, {
    values: v,
    mask: upload(engine, 'mask', mask),
    stats: engine.tensor('stats', [4]),
    shiftMean,
  });
  return readMatrix(engine, v, B, T);
}
