// TensorBoard event records, encoded by hand (no TensorFlow): each record is TFRecord-framed (uint64 length,
// masked CRC-32C of the length, the bytes, masked CRC-32C of the bytes) and holds one tensorflow.Event protobuf:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2;
//                                                   SummaryMetadata metadata = 9; TensorProto tensor = 8; }
// Text (validation generations) is TensorBoard's text plugin: metadata.plugin_data.plugin_name "text" and a scalar
// DT_STRING tensor, as torch.utils.tensorboard's add_text writes it.
// A file starts with an Event whose file_version is "brain.Event:2", as TensorFlow's writers do.
// Browser-safe: returns bytes; the caller writes them.

const CRC32C_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

/** CRC-32C (Castagnoli), the checksum TFRecord uses. */
export function crc32c(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (const b of bytes) crc = CRC32C_TABLE[(crc ^ b) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

/** TFRecord's masked CRC: rotated right by 15 bits plus a constant, so a CRC of CRC-bearing data stays strong. */
function maskedCrc32c(bytes: Uint8Array): number {
  const crc = crc32c(bytes);
  return ((((crc >>> 15) | (crc << 17)) >>> 0) + 0xa282ead8) >>> 0;
}

/** Protobuf wire-format writer for the few field types an Event needs. */
class ProtoWriter {
  private readonly bytes: number[] = [];

  private varint(value: bigint): void {
    let v = BigInt.asUintN(64, value);
    while (v >= 0x80n) {
      this.bytes.push(Number(v & 0x7fn) | 0x80);
      v >>= 7n;
    }
    this.bytes.push(Number(v));
  }

  private tag(field: number, wireType: number): void {
    this.varint(BigInt((field << 3) | wireType));
  }

  double(field: number, value: number): this {
    this.tag(field, 1);
    const buffer = new DataView(new ArrayBuffer(8));
    buffer.setFloat64(0, value, true);
    this.bytes.push(...new Uint8Array(buffer.buffer));
    return this;
  }

  float(field: number, value: number): this {
    this.tag(field, 5);
    const buffer = new DataView(new ArrayBuffer(4));
    buffer.setFloat32(0, value, true);
    this.bytes.push(...new Uint8Array(buffer.buffer));
    return this;
  }

  int64(field: number, value: number): this {
    this.tag(field, 0);
    this.varint(BigInt(value));
    return this;
  }

  bytesField(field: number, value: Uint8Array): this {
    this.tag(field, 2);
    this.varint(BigInt(value.length));
    this.bytes.push(...value);
    return this;
  }

  string(field: number, value: string): this {
    return this.bytesField(field, new TextEncoder().encode(value));
  }

  finish(): Uint8Array {
    return Uint8Array.from(this.bytes);
  }
}

/** One TFRecord around `data`. */
function tfRecord(data: Uint8Array): Uint8Array {
  const header = new Uint8Array(12);
  const view = new DataView(header.buffer);
  view.setBigUint64(0, BigInt(data.length), true);
  view.setUint32(8, maskedCrc32c(header.subarray(0, 8)), true);
  const footer = new Uint8Array(4);
  new DataView(footer.buffer).setUint32(0, maskedCrc32c(data), true);
  const out = new Uint8Array(header.length + data.length + footer.length);
  out.set(header, 0);
  out.set(data, header.length);
  out.set(footer, header.length + data.length);
  return out;
}

/** The record every event file starts with. */
export function fileVersionRecord(wallTime: number): Uint8Array {
  return tfRecord(new ProtoWriter().double(1, wallTime).string(3, 'brain.Event:2').finish());
}

/** One Event holding every scalar of `scalars` as a simple_value at `step` (NaN too: TensorBoard shows it). */
export function scalarsRecord(wallTime: number, step: number, scalars: Record<string, number>): Uint8Array {
  const summary = new ProtoWriter();
  for (const [tag, value] of Object.entries(scalars))
    summary.bytesField(1, new ProtoWriter().string(1, tag).float(2, value).finish());
  return tfRecord(new ProtoWriter().double(1, wallTime).int64(2, step).bytesField(5, summary.finish()).finish());
}

/** tensorflow.DataType DT_STRING. */
const DT_STRING = 7;

/** One Event holding `text` (markdown) under `tag` at `step`, for TensorBoard's Text tab. */
export function textRecord(wallTime: number, step: number, tag: string, text: string): Uint8Array {
  const pluginData = new ProtoWriter().string(1, 'text').finish();
  const metadata = new ProtoWriter().bytesField(1, pluginData).finish();
  // TensorProto { dtype = 1; tensor_shape = 2 (a scalar: no dims); string_val = 8 }
  const tensor = new ProtoWriter().int64(1, DT_STRING).bytesField(2, new Uint8Array(0)).string(8, text).finish();
  const value = new ProtoWriter().string(1, tag).bytesField(9, metadata).bytesField(8, tensor).finish();
  const summary = new ProtoWriter().bytesField(1, value).finish();
  return tfRecord(new ProtoWriter().double(1, wallTime).int64(2, step).bytesField(5, summary).finish());
}
