// WEBGPU_LIMITS (engine/knobs.ts): default for WebGPU's default limits, unset for the adapter's own, anything else
// one line; the byte limits the split tests lower (WEBGPU_MAX_BINDING_BYTES, WEBGPU_MAX_BUFFER_BYTES) likewise.
import { describe, it, expect } from 'vitest';
import { readKnobs } from '../../engine/knobs.ts';
import { describeDevice, type DeviceCapabilities } from '../../engine/device.ts';
import { benchWithEnv } from '../support/bench-with-env.ts';

describe('WEBGPU_LIMITS', () => {
  it("reads default; unset or empty asks for the adapter's own limits", () => {
    expect(readKnobs({ WEBGPU_LIMITS: 'default' }).limits).toBe('default');
    expect(readKnobs({}).limits).toBe('adapter');
    expect(readKnobs({ WEBGPU_LIMITS: '' }).limits).toBe('adapter');
  });

  it('refuses any other value, naming the knob and the value it takes', () => {
    for (const value of ['Default', 'adapter', 'max']) {
      expect(() => readKnobs({ WEBGPU_LIMITS: value })).toThrow(
        `WEBGPU_LIMITS: "${value}" must be default (or unset: the adapter's own limits)`,
      );
    }
  });

  it('stops the benchmarks with one error line and exit 1, before any device starts', async () => {
    const { code, errors } = await benchWithEnv('WEBGPU_LIMITS', 'max', ['kernels']);
    expect(code).toBe(1);
    expect(errors).toEqual([`error: WEBGPU_LIMITS: "max" must be default (or unset: the adapter's own limits)`]);
  });

  it('the device line names the class, the knob that chose it and the default limits', () => {
    const caps = { description: 'lavapipe', deviceClass: 'gpu', defaultLimits: true } as DeviceCapabilities;
    expect(describeDevice(caps, { deviceClass: 'gpu' })).toBe(
      'lavapipe (gpu kernels, WEBGPU_DEVICE_CLASS, WebGPU default limits)',
    );
    expect(describeDevice({ ...caps, defaultLimits: false }, { deviceClass: null })).toBe('lavapipe (gpu kernels)');
  });
});

describe('WEBGPU_MAX_BINDING_BYTES and WEBGPU_MAX_BUFFER_BYTES', () => {
  it('read a byte count below the device limit; unset or empty keeps the limit', () => {
    expect(readKnobs({ WEBGPU_MAX_BUFFER_BYTES: '32768' }).maxBufferBytes).toBe(32768);
    expect(readKnobs({ WEBGPU_MAX_BINDING_BYTES: '16384' }).maxBindingBytes).toBe(16384);
    expect(readKnobs({ WEBGPU_MAX_BUFFER_BYTES: '' }).maxBufferBytes).toBeNull();
    expect(readKnobs({}).maxBufferBytes).toBeNull();
  });

  it('refuse what is not a whole number of bytes, a multiple of 256, at least 4096, naming the knob', () => {
    for (const value of ['32k', '4000', '2048', '32768.5']) {
      expect(() => readKnobs({ WEBGPU_MAX_BUFFER_BYTES: value })).toThrow(
        `WEBGPU_MAX_BUFFER_BYTES: "${value}" must be a whole number of bytes, a multiple of 256 and at least 4096`,
      );
    }
  });
});
