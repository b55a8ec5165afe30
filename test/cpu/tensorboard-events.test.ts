// TensorBoard event files as TensorBoard reads them (test/cpu/tensorboard-reader.ts), and the CRC-32C that
// frames them against the standard check values.
import { describe, it, expect } from 'vitest';
import { crc32c, fileVersionRecord, scalarsRecord, textRecord } from '../../ppo/loggers/tensorboard-events.ts';
import { readEvents } from '../support/tensorboard-reader.ts';

describe('TensorBoard event records', () => {
  it('CRC-32C matches the standard check values', () => {
    expect(crc32c(new TextEncoder().encode('123456789'))).toBe(0xe3069283);
    expect(crc32c(new Uint8Array(32))).toBe(0x8a9136aa);
    expect(crc32c(new Uint8Array(32).fill(0xff))).toBe(0x62a8ab43);
  });

  it("decode with TensorFlow's message definitions: file version first, then scalars per step", () => {
    const file = new Uint8Array([
      ...fileVersionRecord(1700000000.5),
      ...scalarsRecord(1700000001, 3, { 'critic/score/mean': 0.25, 'actor/pg_loss': -1.5 }),
      ...scalarsRecord(1700000002, 40, { 'val-core/arithmetic/acc/mean@1': 1 }),
    ]);
    const events = readEvents(file);
    expect(events[0]).toEqual({ wallTime: 1700000000.5, fileVersion: 'brain.Event:2' });
    expect(events[1]).toMatchObject({ wallTime: 1700000001, step: 3 });
    expect(events[1].summary.value).toEqual([
      { tag: 'critic/score/mean', simpleValue: 0.25 },
      { tag: 'actor/pg_loss', simpleValue: -1.5 },
    ]);
    expect(events[2]).toMatchObject({
      step: 40,
      summary: { value: [{ tag: 'val-core/arithmetic/acc/mean@1', simpleValue: 1 }] },
    });
  });

  it(
    "text (validation generations) decodes as TensorBoard's text plugin: a scalar DT_STRING tensor tagged " + '"text"',
    () => {
      const table = '| input | output | score |\n| --- | --- | --- |\n| 2+2= | 4 | 1 |';
      const [event] = readEvents(textRecord(1700000003, 7, 'val/generations', table));
      expect(event).toMatchObject({ wallTime: 1700000003, step: 7 });
      const [value] = event.summary.value;
      expect(value.tag).toBe('val/generations');
      expect(value.metadata.pluginData.pluginName).toBe('text');
      expect(value.tensor.dtype).toBe(7);
      expect(value.tensor.tensorShape.dim ?? []).toEqual([]);
      expect(new TextDecoder().decode(value.tensor.stringVal[0])).toBe(table);
    },
  );
});
