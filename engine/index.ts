export { Engine, type DispatchArgs } from './engine.ts';
export { expectSize } from './expect-size.ts';
export {
  Tensor,
  type DType,
  type FloatDType,
  type RowWindow,
  bytesPerElement,
  isHalf,
  elementCount,
  shapeString,
  rowsPerWindow,
  alignedRows,
  lcm,
  partRanges,
  matchingPieces,
} from './tensor.ts';
export { type KernelSpec, type BindingSpec, type UniformSpec, foldWorkgroups } from './kernel.ts';
export { Arena, planArena, type ArenaLayout, type ArenaEntry, type ArenaDType } from './arena.ts';
export { describeDevice, WEBGPU_DEFAULT_LIMITS, type DeviceCapabilities } from './device.ts';
export { deviceMemorySize, type DeviceMemorySize } from './device-memory.ts';
export { peakFp32Flops, SOFTWARE_PEAK_FLOPS } from './peak-flops.ts';
export { readKnobs, type EngineKnobs } from './knobs.ts';
export { chooseVariant } from './variants.ts';
export { Rng, seededRandom, type RngState } from './rng.ts';
export { type HalfDType, roundToHalf } from './half-float.ts';
