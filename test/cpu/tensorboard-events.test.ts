// TensorBoard event files as TensorBoard reads them: TFRecord frames with masked CRC-32C, decoded with protobufjs
// from TensorFlow's own message definitions (event.proto / summary.proto, the fields used), not with our writer.
import { describe, it, expect } from 'vitest';
import protobuf from 'protobufjs';
import { crc32c, fileVersionRecord, scalarsRecord } from '../../ppo/loggers/tensorboard-events.ts';

// tensorflow/core/util/event.proto and tensorflow/core/framework/summary.proto, the fields a scalar log uses.
const EVENT_PROTO = `
syntax = "proto3";
package tensorflow;
message Summary {
  message Value {
    string node_name = 7;
    string tag = 1;
    oneof value { float simple_value = 2; bytes obsolete_old_style_histogram = 3; }
  }
  repeated Value value = 1;
}
message Event {
  double wall_time = 1;
  int64 step = 2;
  oneof what { string file_version = 3; bytes graph_def = 4; Summary summary = 5; }
}
`;
const Event = protobuf.parse(EVENT_PROTO).root.lookupType('tensorflow.Event');

/** TFRecord's masked CRC, as tensorflow/core/lib/hash/crc32c.h defines it. */
const masked = (crc: number) => ((((crc >>> 15) | (crc << 17)) >>> 0) + 0xa282ead8) >>> 0;

/** Splits a TFRecord stream into its payloads, checking both checksums of every frame. */
function readRecords(bytes: Uint8Array): Uint8Array[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const records: Uint8Array[] = [];
  for (let at = 0; at < bytes.length;) {
    const length = Number(view.getBigUint64(at, true));
    expect(view.getUint32(at + 8, true)).toBe(masked(crc32c(bytes.subarray(at, at + 8))));
    const data = bytes.subarray(at + 12, at + 12 + length);
    expect(view.getUint32(at + 12 + length, true)).toBe(masked(crc32c(data)));
    records.push(data);
    at += 12 + length + 4;
  }
  return records;
}

describe('TensorBoard event records', () => {
  it('CRC-32C matches the standard check values', () => {
    expect(crc32c(new TextEncoder().encode('123456789'))).toBe(0xe3069283);
    expect(crc32c(new Uint8Array(32))).toBe(0x8a9136aa);
    expect(crc32c(new Uint8Array(32).fill(0xff))).toBe(0x62a8ab43);
  });

  it('decode with TensorFlow\'s message definitions: file version first, then scalars per step', () => {
    const file = new Uint8Array([...fileVersionRecord(1700000000.5), ...scalarsRecord(1700000001, 3, { 'critic/score/mean': 0.25, 'actor/pg_loss': -1.5 }), ...scalarsRecord(1700000002, 40, { 'val-core/arithmetic/acc/mean@1': 1 })]);
    const events = readRecords(file).map((r) => Event.toObject(Event.decode(r), { longs: Number }));
    expect(events[0]).toEqual({ wallTime: 1700000000.5, fileVersion: 'brain.Event:2' });
    expect(events[1]).toMatchObject({ wallTime: 1700000001, step: 3 });
    expect(events[1].summary.value).toEqual([{ tag: 'critic/score/mean', simpleValue: 0.25 }, { tag: 'actor/pg_loss', simpleValue: -1.5 }]);
    expect(events[2]).toMatchObject({ step: 40, summary: { value: [{ tag: 'val-core/arithmetic/acc/mean@1', simpleValue: 1 }] } });
  });
});
