// The device class (engine/device.ts): WEBGPU_DEVICE_CLASS makes every variant choice as on a GPU or a CPU device,
// while what depends on the real adapter (softwareAdapter: peak FLOP/s, memory, how the host waits) stays detected.
// Two engines of different classes live side by side in one process.
import { describe, it, expect } from 'vitest';
import { chooseVariant, Engine, readKnobs, WEBGPU_DEFAULT_LIMITS } from '../../engine/index.ts';
import { sampleVariants } from '../../kernels/decode/sample.ts';
import { sumSquaresVariants } from '../../kernels/util/reduce.ts';
import { gpuEngine } from '../support/gpu-engine.ts';

describe('device class', () => {
  it('follows WEBGPU_DEVICE_CLASS where it is set (npm test sets it per project), else the adapter', async () => {
    const engine = await gpuEngine();
    const detected = engine.caps.softwareAdapter ? 'cpu' : 'gpu';
    expect(engine.caps.deviceClass).toBe(process.env.WEBGPU_DEVICE_CLASS || detected);
  });

  it("two engines on one adapter choose their own class's variants; the adapter stays what it is", async () => {
    const engines = {
      cpu: await Engine.create(readKnobs({ WEBGPU_DEVICE_CLASS: 'cpu' })),
      gpu: await Engine.create(readKnobs({ WEBGPU_DEVICE_CLASS: 'gpu' })),
    };
    try {
      expect(engines.cpu.caps.deviceClass).toBe('cpu');
      expect(engines.gpu.caps.deviceClass).toBe('gpu');
      expect(engines.gpu.caps.softwareAdapter).toBe(engines.cpu.caps.softwareAdapter);
      const chosen = (engine: Engine) => [
        chooseVariant('sample', sampleVariants, engine.caps, engine.knobs).name,
        chooseVariant('sum-squares', sumSquaresVariants, engine.caps, engine.knobs).name,
      ];
      expect(chosen(engines.cpu)).toEqual(['wg8', 'few-workgroups']);
      expect(chosen(engines.gpu)).toEqual(['wg256', 'many-workgroups']);
    } finally {
      for (const engine of Object.values(engines)) engine.destroy();
    }
  });

  it("WEBGPU_LIMITS=default: every limit the engine keeps to is WebGPU's default, whatever the adapter offers", async () => {
    const engine = await Engine.create(readKnobs({ WEBGPU_LIMITS: 'default' }));
    try {
      expect(engine.caps.defaultLimits).toBe(true);
      for (const [key, value] of Object.entries(WEBGPU_DEFAULT_LIMITS)) {
        const cap = engine.caps[key as keyof typeof engine.caps];
        if (cap === undefined) continue;
        if (key.startsWith('min')) expect(cap, key).toBeGreaterThanOrEqual(value);
        else expect(cap, key).toBeLessThanOrEqual(value);
      }
      expect(engine.caps.maxStorageBuffersPerShaderStage).toBe(8);
    } finally {
      engine.destroy();
    }
  });
});
