// Bench cases of clear-ranges for `node tools/bench.js kernels` (tools/bench/kernels.ts runs them).
import { clearRanges, rangeTable } from '../../kernels/util/clear-ranges.ts';
import { clearRangesRef } from '../../kernels/util/clear-ranges.ref.ts';
import { LORA_MODULES, loraProjections, offBlockRanges, stackedRank } from '../../models/lora.ts';
import { F32_BYTES, MODEL, checkOutput, randomValues, upload, type KernelBenchCase } from './bench-inputs.ts';

/** The off-block entries of one layer's fused-qkv Bᵀ gradient under rank-8 LoRA on every linear module (24 ranges). */
export function clearRangesCases(): KernelBenchCase[] {
  const settings = { rank: 8, alpha: 16, targetModules: [...LORA_MODULES], useRslora: false };
  const qkv = loraProjections(MODEL, settings).find((p) => p.kind === 'qkv')!;
  const size = stackedRank(qkv, settings) * qkv.outFeatures;
  const ranges = offBlockRanges(qkv, settings);
  const data = randomValues(size, 31);
  const cleared = ranges.reduce((n, [start, end]) => n + end - start, 0);
  const clearRangesExpected = () => clearRangesRef({ data, ranges });
  return [
    {
      op: 'clear-ranges',
      kernel: 'clear-ranges',
      shape: `ranges=${ranges.length},elements=${cleared}`,
      bytes: F32_BYTES * cleared,
      reference: clearRangesExpected,
      setup: (engine) => {
        const tensor = upload(engine, 'data', data);
        const table = rangeTable(ranges, size, 'bench');
        const rangesTensor = engine.tensorFrom('bench-ranges', [table.pairs.length], table.pairs, 'u32');
        return {
          run: () => clearRanges(engine, { data: tensor, ranges: rangesTensor, table }),
          check: () => checkOutput(engine, 'data', tensor, clearRangesExpected(), 1e-7, 0),
        };
      },
    },
  ];
}
