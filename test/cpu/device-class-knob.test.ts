// WEBGPU_DEVICE_CLASS (engine/knobs.ts): gpu or cpu, unset for the adapter's own class, anything else one line.
import { describe, it, expect } from 'vitest';
import { readKnobs } from '../../engine/knobs.ts';
import { benchWithEnv } from '../support/bench-with-env.ts';

describe('WEBGPU_DEVICE_CLASS', () => {
  it('reads gpu and cpu; unset or empty leaves the choice to the adapter', () => {
    expect(readKnobs({ WEBGPU_DEVICE_CLASS: 'gpu' }).deviceClass).toBe('gpu');
    expect(readKnobs({ WEBGPU_DEVICE_CLASS: 'cpu' }).deviceClass).toBe('cpu');
    expect(readKnobs({}).deviceClass).toBeNull();
    expect(readKnobs({ WEBGPU_DEVICE_CLASS: '' }).deviceClass).toBeNull();
  });

  it('refuses any other value, naming the knob and the values it takes', () => {
    for (const value of ['GPU', 'tpu', 'software']) {
      expect(() => readKnobs({ WEBGPU_DEVICE_CLASS: value })).toThrow(
        `WEBGPU_DEVICE_CLASS: "${value}" must be gpu or cpu (or unset: the adapter's own class)`,
      );
    }
  });

  it('stops the benchmarks as it stops train.js: one error line, exit 1, before any device starts', async () => {
    const { code, errors } = await benchWithEnv('WEBGPU_DEVICE_CLASS', 'tpu', ['kernels']);
    expect(code).toBe(1);
    expect(errors).toEqual([
      'error: WEBGPU_DEVICE_CLASS: "tpu" must be gpu or cpu (or unset: the adapter\'s own class)',
    ]);
  });
});
