// How many samples decode at once (the rollout's slots): every tensor of the decode batch must fit one storage
// binding, and the whole batch the memory budget (verl's rollout.gpu_memory_utilization of the device).
import type { DeviceCapabilities } from '../../engine/device.ts';
import { bytesPerElement, type FloatDType } from '../../engine/index.ts';
import type { DecoderConfig } from '../../models/hf-config.ts';
import { qkvWidth } from '../../models/parameter-layout.ts';
import type { RolloutConfig } from './types.ts';

/** The decode batch's memory per slot and the largest single tensor per slot, for a prompt width P and a KV cache
 *  of `cacheDtype` (a half cache: half the bytes, and a float32 copy of one layer's `blockKeys` slots that
 *  multi-token calls attend through, models/incremental-decoder.ts). */
function slotFootprint(m: DecoderConfig, P: number, capacity: number, cacheDtype: FloatDType, blockKeys: number) {
  const f32 = 4;
  const cacheBytes = bytesPerElement(cacheDtype);
  const kvWidth = m.numKvHeads * m.headDim;
  const W = qkvWidth(m);
  const I = m.intermediateSize;
  const C = m.hiddenSize;
  const NHS = m.numHeads * m.headDim;
  // The decode cache (k and v per layer, one layer's compaction scratch, the key mask) and the prefill cache.
  const caches = (2 * m.numLayers + 1) * (capacity + P) * kvWidth * cacheBytes + (capacity + P) * f32;
  const unpacked = cacheDtype === 'f32' ? 0 : 2 * blockKeys * kvWidth * f32;
  // The prefill's activations (P tokens a slot, the largest call), and the LM head's rows.
  const activations = P * (3 * C + 2 * W + NHS + 3 * I + m.numHeads * 2) * f32;
  const head = (3 * C + m.vocabSize) * f32;
  const largest: [string, number][] = [
    ['a KV cache layer', capacity * kvWidth * cacheBytes],
    ['a cache layer unpacked for a multi-token call', cacheDtype === 'f32' ? 0 : blockKeys * kvWidth * f32],
    ['the prefill qkv', P * W * f32],
    ['the prefill gate_up', P * 2 * I * f32],
    ['the logits', m.vocabSize * f32],
  ];
  return { bytes: caches + unpacked + activations + head, largest };
}

/**
 * How many samples decode at once: every tensor of the decode batch must fit one binding
 * (maxStorageBufferBindingSize, maxBufferSize) and the whole batch the memory budget.
 */
export function rolloutSlots(
  caps: Pick<DeviceCapabilities, 'maxBufferSize' | 'maxStorageBufferBindingSize'>,
  m: DecoderConfig,
  shape: {
    promptLength: number;
    capacity: number;
    samples: number;
    /** The KV cache's storage (rollout.dtype); float32 when absent. */
    cacheDtype?: FloatDType;
    /** The most cache slots a multi-token call attends: the prompt's where only prefills take several tokens
     *  (continuous batching), the whole cache where observations are appended (multi-turn); capacity when absent. */
    blockKeys?: number;
  },
  c: Pick<RolloutConfig, 'memoryBudgetBytes' | 'maxSlots'>,
): number {
  const { bytes, largest } = slotFootprint(
    m,
    shape.promptLength,
    shape.capacity,
    shape.cacheDtype ?? 'f32',
    shape.blockKeys ?? shape.capacity,
  );
  const binding = Math.min(caps.maxStorageBufferBindingSize, caps.maxBufferSize);
  const [what, perSlot] = largest.reduce((x, y) => (y[1] > x[1] ? y : x));
  const budget = c.memoryBudgetBytes ?? Infinity;
  const slots = Math.min(
    shape.samples,
    c.maxSlots ?? Infinity,
    Math.floor(binding / perSlot),
    Math.floor(budget / bytes),
  );
  if (slots < 1) {
    throw new Error(
      `rollout: one sample (prompt ${shape.promptLength} + cache ${shape.capacity} slots) needs ${bytes} bytes and ` +
        `${perSlot} bytes for ${what}; ` +
        `the budget is ${budget} bytes (actor_rollout_ref.rollout.gpu_memory_utilization) and one binding holds ` +
        `${binding}: ` +
        'lower data.max_prompt_length or data.max_response_length, or raise gpu_memory_utilization',
    );
  }
  return slots;
}
