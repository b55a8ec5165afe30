// The runtime every kernel launches through: pipeline and bind-group caches, one command encoder that collects
// a whole phase of dispatches (one compute pass, submitted once), a uniform ring written once per submit, and
// readback only when asked for numbers.
import { createGpu, type DeviceCapabilities, type Gpu } from './device.ts';
import { readKnobs, type EngineKnobs } from './knobs.ts';
import { generateDeclarations, packUniforms, uniformByteSize, type KernelSpec } from './kernel.ts';
import {
  Tensor,
  shapeString,
  bytesPerElement,
  elementCount,
  isHalf,
  matchingPieces,
  partRanges,
  rowWindows,
  type DType,
  type RowWindow,
  type TypedArrayOf,
} from './tensor.ts';
import { decodeHalf, encodeHalf } from './half-float.ts';
import { Profiler } from './profiler.ts';
import { openPipelineLog } from './pipeline-log.ts';
import { awaitDawn } from './dawn-poll.ts';
import { deviceMemorySize, type DeviceMemorySize } from './device-memory.ts';

const UNIFORM_RING_BYTES = 1 << 18;
/** Bytes of unmapped read-back staging buffers kept for reuse, at most (releaseStaging). */
const STAGING_KEPT_BYTES = 4 << 20;

export interface DispatchArgs {
  bindings: Readonly<Record<string, Tensor>>;
  uniforms?: Readonly<Record<string, number>>;
  workgroups: readonly [number, number?, number?];
}

interface CompiledKernel {
  pipeline: GPUComputePipeline;
  layout: GPUBindGroupLayout;
  uniformBytes: number;
  id: number;
  /** Names of the bindings the shader may write (read_write): each dispatch counts a write to their buffers. */
  writes: readonly string[];
}

export class Engine {
  readonly device: GPUDevice;
  readonly caps: DeviceCapabilities;
  readonly knobs: EngineKnobs;
  /** The device's memory size and where it came from (the rollout's budget is a fraction of it). */
  readonly memory: DeviceMemorySize;
  readonly profiler: Profiler | null;

  private readonly kernels = new Map<KernelSpec, CompiledKernel>();
  private readonly modules = new Map<string, GPUShaderModule>();
  /** Bind groups by kernel and bound ranges, with the buffers (bufferId) they bind. */
  private readonly bindGroups = new Map<string, { group: GPUBindGroup; ids: Set<number> }>();
  /** The keys of the cached bind groups that bind each buffer: dropped with the buffer. */
  private readonly bindGroupKeys = new Map<number, Set<string>>();
  private readonly bufferIds = new WeakMap<GPUBuffer, number>();
  private nextId = 1;

  private encoder: GPUCommandEncoder | null = null;
  private pass: GPUComputePassEncoder | null = null;
  private readonly uniformBuffer: GPUBuffer;
  private readonly uniformStaging = new ArrayBuffer(UNIFORM_RING_BYTES);
  private readonly uniformView = new DataView(this.uniformStaging);
  private uniformCursor = 0;
  private readonly errors: string[] = [];
  private readonly uniformAlign: number;
  /** Dispatches recorded since the engine was created (for tests and benchmarks). */
  dispatchCount = 0;
  /** Host↔device traffic since the engine was created (a step's perf/readbacks and perf/upload_bytes are the
   *  difference across it): each read() or readAll() is one pipeline drain, whatever its size; each upload() adds
   *  its bytes. The uniform ring's once-per-submit write is not counted: it carries dispatch parameters, not data,
   *  and grows with the dispatches recorded (dispatchCount) rather than with what the host sends. */
  readonly transfers = { readbacks: 0, readbackBytes: 0, uploads: 0, uploadBytes: 0 };
  /** Bytes of the tensors' buffers alive now, and the most ever alive at once (the measured peak of a run). */
  allocatedBytes = 0;
  peakAllocatedBytes = 0;
  private readonly liveBuffers = new WeakSet<GPUBuffer>();
  /** Writes recorded into each buffer (see writeCount). */
  private readonly writeCounts = new WeakMap<GPUBuffer, number>();

  /** Unmapped read-back staging buffers by size, for the next read of that size (releaseStaging). */
  private readonly freeStaging = new Map<number, GPUBuffer[]>();
  private keptStagingBytes = 0;
  /** Called with each spec whose pipeline is created (WEBGPU_PIPELINE_LOG). */
  private pipelineLog: ((spec: KernelSpec) => void) | null = null;

  /** `systemMemoryBytes` (os.totalmem() in Node; unknown in a browser tab): what a software adapter or a GPU with
   *  unified memory allocates from (engine/device-memory.ts). */
  static async create(knobs: EngineKnobs = readKnobs(), systemMemoryBytes: number | null = null): Promise<Engine> {
    const engine = new Engine(await createGpu(knobs), systemMemoryBytes);
    if (knobs.pipelineLog) engine.pipelineLog = await openPipelineLog(knobs.pipelineLog);
    return engine;
  }

  constructor(
    readonly gpu: Gpu,
    systemMemoryBytes: number | null = null,
  ) {
    this.device = gpu.device;
    this.caps = gpu.caps;
    this.knobs = gpu.knobs;
    this.memory = deviceMemorySize(
      { description: this.caps.description, software: this.caps.softwareAdapter },
      this.knobs.deviceMemoryBytes,
      systemMemoryBytes,
    );
    this.uniformAlign = Math.max(16, this.caps.minUniformBufferOffsetAlignment);
    this.uniformBuffer = this.device.createBuffer({
      label: 'uniform-ring',
      size: UNIFORM_RING_BYTES,
      usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST,
    });
    this.device.addEventListener('uncapturederror', (event) => {
      this.errors.push((event as GPUUncapturedErrorEvent).error.message);
    });
    this.profiler = this.knobs.profile && this.caps.timestampQuery ? new Profiler(this.device) : null;
  }

  // ---- memory -------------------------------------------------------------------------------------------

  /** Bytes one storage binding may span (the device's limit, or less under WEBGPU_MAX_BINDING_BYTES). */
  /** Entries of the engine's caches, which must stay flat over a long run: compiled pipelines, and bind groups
   *  (one per distinct set of bound buffers; a destroyed tensor's are dropped). */
  get cachedPipelines(): number {
    return this.kernels.size;
  }

  get cachedBindGroups(): number {
    return this.bindGroups.size;
  }

  get maxBindingBytes(): number {
    return Math.min(this.caps.maxStorageBufferBindingSize, this.caps.maxBufferSize);
  }

  /** A buffer may exceed one binding (up to maxBufferSize); kernels then bind it in windows (bindingWindows). */
  createBuffer(label: string, byteLength: number, extraUsage = 0): GPUBuffer {
    if (byteLength > this.caps.maxBufferSize) {
      throw new Error(
        `tensor ${label} needs ${byteLength} bytes but this device's largest buffer is ${this.caps.maxBufferSize} ` +
          `bytes ` +
          `(maxBufferSize); split it into several tensors`,
      );
    }
    const buffer = this.device.createBuffer({
      label,
      size: Math.max(16, Math.ceil(byteLength / 16) * 16),
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST | extraUsage,
    });
    this.liveBuffers.add(buffer);
    this.allocatedBytes += buffer.size;
    this.peakAllocatedBytes = Math.max(this.peakAllocatedBytes, this.allocatedBytes);
    return buffer;
  }

  /** `tensor` as consecutive windows of whole rows (`rowElements` each) that this device can bind. */
  bindingWindows<D extends DType>(tensor: Tensor<D>, rowElements = 1): RowWindow<D>[] {
    return rowWindows(tensor, rowElements, this.maxBindingBytes, this.caps.minStorageBufferOffsetAlignment);
  }

  /** A zero-filled tensor in its own buffer. */
  tensor<D extends DType = 'f32'>(name: string, shape: readonly number[], dtype: D = 'f32' as D): Tensor<D> {
    const buffer = this.createBuffer(name, elementCount(shape) * bytesPerElement(dtype));
    return new Tensor(name, buffer, 0, shape, dtype);
  }

  /** A tensor holding `data`. */
  tensorFrom<D extends DType = 'f32'>(
    name: string,
    shape: readonly number[],
    data: ArrayLike<number>,
    dtype: D = 'f32' as D,
  ): Tensor<D> {
    const t = this.tensor(name, shape, dtype);
    this.upload(t, data);
    return t;
  }

  /** Writes host data into a tensor, after every dispatch recorded so far (queue order is kept). A bf16/f16 tensor
   *  takes float32 values and stores them rounded to nearest even. */
  upload(tensor: Tensor, data: ArrayLike<number>): void {
    if (data.length !== tensor.size) {
      throw new Error(
        `upload to ${tensor.name}: got ${data.length} values for shape ${shapeString(tensor.shape)} (${tensor.size})`,
      );
    }
    const typed = toTyped(tensor.dtype, data);
    if (this.encoder) this.flush();
    this.transfers.uploads++;
    this.transfers.uploadBytes += typed.byteLength;
    const ranges = partRanges(tensor);
    ranges.forEach(({ first, tensor: part }, i) => {
      this.countWrite(part.buffer);
      const start = first * typed.BYTES_PER_ELEMENT;
      // The last part takes the rest: encoded halves of an odd count end in a padding half.
      const end = i + 1 < ranges.length ? ranges[i + 1].first * typed.BYTES_PER_ELEMENT : typed.byteLength;
      this.device.queue.writeBuffer(part.buffer, part.byteOffset, typed.buffer, typed.byteOffset + start, end - start);
    });
  }

  /**
   * Writes recorded so far into the buffer holding `tensor` (any part of it): uploads, clears, copies into it and
   * dispatches that bind it read_write. Something derived from a tensor (the trunk's transposed weights) is
   * stale exactly when this count has moved since it was derived; a count that has not moved proves no write.
   */
  writeCount(tensor: Tensor): number {
    return tensor.parts.reduce((n, part) => n + (this.writeCounts.get(part.buffer) ?? 0), 0);
  }

  private countWrite(buffer: GPUBuffer): void {
    this.writeCounts.set(buffer, (this.writeCounts.get(buffer) ?? 0) + 1);
  }

  destroyTensor(tensor: Tensor): void {
    if (this.encoder) this.flush();
    for (const { buffer } of tensor.parts) {
      const id = this.bufferIds.get(buffer);
      if (id !== undefined) {
        for (const key of this.bindGroupKeys.get(id) ?? []) {
          for (const other of this.bindGroups.get(key)!.ids)
            if (other !== id) this.bindGroupKeys.get(other)!.delete(key);
          this.bindGroups.delete(key);
        }
        this.bindGroupKeys.delete(id);
      }
      if (this.liveBuffers.delete(buffer)) this.allocatedBytes -= buffer.size;
      buffer.destroy();
    }
  }

  // ---- recording ----------------------------------------------------------------------------------------

  private compile(spec: KernelSpec): CompiledKernel {
    const cached = this.kernels.get(spec);
    if (cached) return cached;
    for (const feature of spec.features ?? []) {
      if (!this.device.features.has(feature)) {
        throw new Error(
          `kernel ${spec.name} needs device feature ${feature}, which this device lacks; choose another variant`,
        );
      }
    }
    if (spec.bindings.length > this.caps.maxStorageBuffersPerShaderStage) {
      throw new Error(
        `kernel ${spec.name}: ${spec.bindings.length} storage bindings exceed the device's ` +
          `${this.caps.maxStorageBuffersPerShaderStage}`,
      );
    }
    const code = generateDeclarations(spec) + spec.source;
    let module = this.modules.get(code);
    if (!module) {
      module = this.device.createShaderModule({ label: spec.name, code });
      this.modules.set(code, module);
    }
    const uniformBytes = uniformByteSize(spec);
    const layout = this.device.createBindGroupLayout({
      label: spec.name,
      entries: [
        {
          binding: 0,
          visibility: GPUShaderStage.COMPUTE,
          buffer: { type: 'uniform', hasDynamicOffset: true, minBindingSize: uniformBytes },
        },
        ...spec.bindings.map((b, i) => ({
          binding: i + 1,
          visibility: GPUShaderStage.COMPUTE,
          buffer: { type: b.access === 'read' ? ('read-only-storage' as const) : ('storage' as const) },
        })),
      ],
    });
    const pipeline = this.device.createComputePipeline({
      label: spec.name,
      layout: this.device.createPipelineLayout({ bindGroupLayouts: [layout] }),
      compute: {
        module,
        entryPoint: spec.entryPoint ?? 'main',
        constants: spec.constants as Record<string, number> | undefined,
      },
    });
    const writes = spec.bindings.filter((b) => b.access === 'read_write').map((b) => b.name);
    const compiled = { pipeline, layout, uniformBytes, id: this.nextId++, writes };
    this.kernels.set(spec, compiled);
    this.pipelineLog?.(spec);
    return compiled;
  }

  private bufferId(buffer: GPUBuffer): number {
    let id = this.bufferIds.get(buffer);
    if (id === undefined) {
      id = this.nextId++;
      this.bufferIds.set(buffer, id);
    }
    return id;
  }

  private bindGroup(
    spec: KernelSpec,
    kernel: CompiledKernel,
    bindings: Readonly<Record<string, Tensor>>,
  ): GPUBindGroup {
    let key = `${kernel.id}`;
    const ids = new Set<number>();
    const entries: GPUBindGroupEntry[] = [
      { binding: 0, resource: { buffer: this.uniformBuffer, size: kernel.uniformBytes } },
    ];
    spec.bindings.forEach((b, i) => {
      const t = bindings[b.name];
      if (!t) throw new Error(`kernel ${spec.name}: binding ${b.name} is missing`);
      if (t.parts.length > 1) {
        throw new Error(
          `kernel ${spec.name}: binding ${b.name} (tensor ${t.name}, ${shapeString(t.shape)}) lies in ` +
            `${t.parts.length} buffers (it is above maxBufferSize); the launcher must bind it in windows ` +
            `(engine.bindingWindows)`,
        );
      }
      if (t.byteOffset % this.caps.minStorageBufferOffsetAlignment !== 0) {
        throw new Error(
          `kernel ${spec.name}: binding ${b.name} (tensor ${t.name}) starts at byte ${t.byteOffset}, ` +
            `not a multiple of ${this.caps.minStorageBufferOffsetAlignment}; pass an element offset instead`,
        );
      }
      // Half tensors of an odd element count end mid-word; bindings are whole words.
      const size = Math.max(4, wordBytes(t.byteLength));
      if (size > this.maxBindingBytes) {
        throw new Error(
          `kernel ${spec.name}: binding ${b.name} (tensor ${t.name}, ${shapeString(t.shape)}) spans ${size} bytes ` +
            `but this ` +
            `device binds at most ${this.maxBindingBytes} bytes (maxStorageBufferBindingSize); the launcher must ` +
            `bind it in windows (engine.bindingWindows)`,
        );
      }
      const id = this.bufferId(t.buffer);
      ids.add(id);
      key += `|${id}@${t.byteOffset}+${size}`;
      entries.push({ binding: i + 1, resource: { buffer: t.buffer, offset: t.byteOffset, size } });
    });
    const cached = this.bindGroups.get(key);
    if (cached) return cached.group;
    const group = this.device.createBindGroup({ label: spec.name, layout: kernel.layout, entries });
    this.bindGroups.set(key, { group, ids });
    for (const id of ids) {
      const keys = this.bindGroupKeys.get(id);
      if (keys) keys.add(key);
      else this.bindGroupKeys.set(id, new Set([key]));
    }
    return group;
  }

  private ensureEncoder(): GPUCommandEncoder {
    if (this.gpu.lostReason) throw new Error(this.gpu.lostReason);
    if (!this.encoder) this.encoder = this.device.createCommandEncoder();
    return this.encoder;
  }

  private endPass(): void {
    if (this.pass) {
      this.pass.end();
      this.pass = null;
    }
  }

  /** Records one dispatch into the current phase; nothing runs until flush() or a read. */
  dispatch(spec: KernelSpec, args: DispatchArgs): void {
    const kernel = this.compile(spec);
    const slot = Math.ceil(kernel.uniformBytes / this.uniformAlign) * this.uniformAlign;
    if (this.uniformCursor + slot > UNIFORM_RING_BYTES) this.flush();
    const uniformOffset = this.uniformCursor;
    packUniforms(spec, args.uniforms ?? {}, this.uniformView, uniformOffset);
    this.uniformCursor += slot;

    const group = this.bindGroup(spec, kernel, args.bindings);
    const [x, y = 1, z = 1] = args.workgroups;
    const max = this.caps.maxComputeWorkgroupsPerDimension;
    if (x > max || y > max || z > max) {
      throw new Error(
        `kernel ${spec.name}: ${x}x${y}x${z} workgroups exceed ${max} per dimension (fold with foldWorkgroups)`,
      );
    }
    if (x === 0 || y === 0 || z === 0) return;
    for (const name of kernel.writes) this.countWrite(args.bindings[name].buffer);
    const encoder = this.ensureEncoder();
    if (this.profiler) {
      this.endPass();
      this.pass = encoder.beginComputePass({ timestampWrites: this.profiler.nextWrites(spec.name) });
    } else if (!this.pass) {
      this.pass = encoder.beginComputePass();
    }
    this.pass.setPipeline(kernel.pipeline);
    this.pass.setBindGroup(0, group, [uniformOffset]);
    this.pass.dispatchWorkgroups(x, y, z);
    if (this.profiler) this.endPass();
    this.dispatchCount++;
    if (this.knobs.debug >= 2) console.error(`dispatch ${spec.name} ${x}x${y}x${z}`);
  }

  /** Zero-fills a tensor (in queue order with the dispatches around it). */
  clear(tensor: Tensor): void {
    this.endPass();
    for (const part of tensor.parts) {
      this.countWrite(part.buffer);
      this.ensureEncoder().clearBuffer(part.buffer, part.byteOffset, Math.ceil(part.byteLength / 4) * 4);
    }
  }

  copy(source: Tensor, target: Tensor): void {
    if (source.size !== target.size) {
      throw new Error(`copy ${source.name} -> ${target.name}: ${source.size} vs ${target.size} elements`);
    }
    // A raw copy of words: 32-bit dtypes copy into each other (ids into scratch), never halves into 32-bit.
    if (bytesPerElement(source.dtype) !== bytesPerElement(target.dtype))
      throw new Error(`copy ${source.name} -> ${target.name}: ${source.dtype} vs ${target.dtype}`);
    this.endPass();
    for (const [from, to] of matchingPieces(source, target)) {
      // Buffers copy whole words: an odd count of halves would overwrite the element after the target's last.
      if (from.byteLength % 4 !== 0)
        throw new Error(
          `copy ${from.name} -> ${to.name}: ${from.size} ${from.dtype} elements end mid-word; copy an even count`,
        );
      this.countWrite(to.buffer);
      this.ensureEncoder().copyBufferToBuffer(from.buffer, from.byteOffset, to.buffer, to.byteOffset, from.byteLength);
    }
  }

  /** Submits everything recorded so far as one command buffer. */
  flush(): void {
    if (!this.encoder) return;
    this.endPass();
    if (this.profiler) this.profiler.resolve(this.encoder);
    if (this.uniformCursor > 0)
      this.device.queue.writeBuffer(this.uniformBuffer, 0, this.uniformStaging, 0, this.uniformCursor);
    this.device.queue.submit([this.encoder.finish()]);
    this.encoder = null;
    this.uniformCursor = 0;
    this.throwIfFailed();
  }

  private throwIfFailed(): void {
    if (this.gpu.lostReason) throw new Error(this.gpu.lostReason);
    if (this.errors.length > 0) {
      const message = this.errors.splice(0).join('\n');
      throw new Error(`WebGPU reported errors:\n${message}`);
    }
  }

  /** Waits until the GPU has finished everything submitted. */
  async sync(): Promise<void> {
    this.flush();
    await awaitDawn(this.device.queue.onSubmittedWorkDone(), this.caps.softwareAdapter);
    if (this.profiler) await this.profiler.collect();
    this.throwIfFailed();
  }

  /** Copies a tensor back to the host. This is the only way numbers leave the GPU. */
  async read<D extends DType>(tensor: Tensor<D>): Promise<TypedArrayOf<D>> {
    const [values] = await this.readAll([tensor]);
    return values as TypedArrayOf<D>;
  }

  /**
   * Copies tensors back to the host as one read-back: one staging buffer, one submit, one map (a read of each would
   * submit and map once per tensor). `awaitedLater`: the caller records more work before it awaits the values (a
   * decode loop reading each step's tokens), so waiting for them need not spin the host (dawn-poll.ts).
   */
  async readAll(
    tensors: readonly Tensor[],
    options: { awaitedLater?: boolean } = {},
  ): Promise<(Float32Array | Uint32Array | Int32Array)[]> {
    const starts: number[] = [];
    let size = 0;
    for (const tensor of tensors) {
      starts.push(size);
      size += wordBytes(tensor.byteLength);
    }
    const staging = this.stagingBuffer(size || 4, tensors);
    this.endPass();
    tensors.forEach((tensor, k) => {
      let at = starts[k];
      for (const part of tensor.parts) {
        if (part.byteLength > 0)
          this.ensureEncoder().copyBufferToBuffer(
            part.buffer,
            part.byteOffset,
            staging,
            at,
            wordBytes(part.byteLength),
          );
        at += part.byteLength;
      }
    });
    this.flush();
    this.transfers.readbacks++;
    this.transfers.readbackBytes += staging.size;
    await awaitDawn(staging.mapAsync(GPUMapMode.READ), this.caps.softwareAdapter, !options.awaitedLater);
    const mapped = staging.getMappedRange();
    const values = tensors.map((tensor, k) =>
      fromBytes(tensor.dtype, mapped.slice(starts[k], starts[k] + wordBytes(tensor.byteLength)), tensor.size),
    );
    staging.unmap();
    this.releaseStaging(staging);
    this.throwIfFailed();
    if (this.profiler) await this.profiler.collect();
    return values;
  }

  /** A mappable buffer of `size` bytes for a read-back: a free one of that size, else a new one. */
  private stagingBuffer(size: number, tensors: readonly Tensor[]): GPUBuffer {
    const kept = this.freeStaging.get(size)?.pop();
    if (kept) {
      this.keptStagingBytes -= size;
      return kept;
    }
    return this.device.createBuffer({
      label: `read ${tensors.map((t) => t.name).join(', ')}`,
      size,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
  }

  /**
   * Keeps an unmapped staging buffer for the next read of its size (a decode loop reads the same rows every step: on
   * lavapipe each new mappable buffer maps memory and each destroyed one unmaps it, a TLB shootdown that interrupts
   * the device's threads), the sizes read most recently first, within STAGING_KEPT_BYTES in all.
   */
  private releaseStaging(staging: GPUBuffer): void {
    const { size } = staging;
    if (size > STAGING_KEPT_BYTES) {
      staging.destroy();
      return;
    }
    const free = this.freeStaging.get(size) ?? [];
    // Re-inserted: the map's order is the sizes' last use, oldest first.
    this.freeStaging.delete(size);
    this.freeStaging.set(size, [...free, staging]);
    this.keptStagingBytes += size;
    for (const [oldest, buffers] of this.freeStaging) {
      while (buffers.length > 0 && this.keptStagingBytes > STAGING_KEPT_BYTES) {
        buffers.shift()!.destroy();
        this.keptStagingBytes -= oldest;
      }
      if (buffers.length === 0) this.freeStaging.delete(oldest);
      if (this.keptStagingBytes <= STAGING_KEPT_BYTES) break;
    }
  }

  destroy(): void {
    this.encoder = null;
    this.pass = null;
    this.gpu.destroy();
  }
}

/** Bytes rounded up to whole 4-byte words (copies and bindings move words). */
function wordBytes(bytes: number): number {
  return Math.ceil(bytes / 4) * 4;
}

function toTyped(dtype: DType, data: ArrayLike<number>): Float32Array | Uint32Array | Int32Array | Uint16Array {
  if (isHalf(dtype)) return encodeHalf(dtype, data);
  if (dtype === 'f32') return data instanceof Float32Array ? data : Float32Array.from(data);
  if (dtype === 'u32') return data instanceof Uint32Array ? data : Uint32Array.from(data);
  return data instanceof Int32Array ? data : Int32Array.from(data);
}

function fromBytes(dtype: DType, bytes: ArrayBuffer, size: number): Float32Array | Uint32Array | Int32Array {
  if (isHalf(dtype)) return decodeHalf(dtype, new Uint16Array(bytes), size);
  if (dtype === 'f32') return new Float32Array(bytes);
  if (dtype === 'u32') return new Uint32Array(bytes);
  return new Int32Array(bytes);
}
