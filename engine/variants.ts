// Kernel variant choice: each op lists its variants with what they need; the first the device supports wins,
// unless WEBGPU_KERNEL_VARIANTS (or a config override) names one.
import type { DeviceCapabilities } from './device.ts';
import type { EngineKnobs } from './knobs.ts';

export interface Variant<T> {
  name: string;
  /** Whether this device can run it (features, limits) and should prefer it. */
  supported: (caps: DeviceCapabilities) => boolean;
  value: T;
}

export function chooseVariant<T>(
  op: string,
  variants: readonly Variant<T>[],
  caps: DeviceCapabilities,
  knobs: EngineKnobs,
): Variant<T> {
  const forced = knobs.kernelVariants[op];
  if (forced) {
    const variant = variants.find((v) => v.name === forced);
    if (!variant) {
      throw new Error(
        `WEBGPU_KERNEL_VARIANTS: ${op} has no variant "${forced}" (choose from ` +
          `${variants.map((v) => v.name).join(', ')})`,
      );
    }
    return variant;
  }
  const variant = variants.find((v) => v.supported(caps));
  if (!variant) throw new Error(`no variant of ${op} runs on ${caps.description}`);
  return variant;
}
