// An event-file reader that is not ours: TFRecord frames checked with TensorFlow's masked CRC-32C, each Event decoded
// by protobufjs from TensorFlow's own message definitions (event.proto / summary.proto, the fields a scalar log and the
// text plugin use). The CRC-32C itself is checked against the standard values in tensorboard-events.test.ts.
import protobuf from 'protobufjs';
import { crc32c } from '../../ppo/loggers/tensorboard-events.ts';

// tensorflow/core/util/event.proto and tensorflow/core/framework/summary.proto, the fields a scalar log and the text
// plugin use.
const EVENT_PROTO = `
syntax = "proto3";
package tensorflow;
message TensorShapeProto {
  message Dim { int64 size = 1; string name = 2; }
  repeated Dim dim = 2;
  bool unknown_rank = 3;
}
message TensorProto {
  int32 dtype = 1;
  TensorShapeProto tensor_shape = 2;
  repeated bytes string_val = 8;
}
message SummaryMetadata {
  message PluginData { string plugin_name = 1; bytes content = 2; }
  PluginData plugin_data = 1;
}
message Summary {
  message Value {
    string node_name = 7;
    string tag = 1;
    SummaryMetadata metadata = 9;
    oneof value { float simple_value = 2; bytes obsolete_old_style_histogram = 3; TensorProto tensor = 8; }
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
  for (let at = 0; at < bytes.length; ) {
    const length = Number(view.getBigUint64(at, true));
    if (view.getUint32(at + 8, true) !== masked(crc32c(bytes.subarray(at, at + 8))))
      throw new Error(`record at byte ${at}: length checksum mismatch`);
    const data = bytes.subarray(at + 12, at + 12 + length);
    if (view.getUint32(at + 12 + length, true) !== masked(crc32c(data)))
      throw new Error(`record at byte ${at}: data checksum mismatch`);
    records.push(data);
    at += 12 + length + 4;
  }
  return records;
}

/**
 * Every Event of an event file, as plain objects (wallTime, step, fileVersion or summary.value[{tag, simpleValue}]).
 */
export function readEvents(bytes: Uint8Array): any[] {
  return readRecords(bytes).map((record) => Event.toObject(Event.decode(record), { longs: Number }));
}
