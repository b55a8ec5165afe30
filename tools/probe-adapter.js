// Prints the WebGPU adapter's description and exits 0, or exits 1 when none is usable.
import { create, globals } from 'webgpu';

Object.assign(globalThis, globals);
const gpu = create([]);
const adapter = await gpu.requestAdapter();
if (!adapter) process.exit(1);
const device = await adapter.requestDevice();
const info = adapter.info;
console.log(`${info.vendor} ${info.architecture} ${info.device} ${info.description}`.replace(/\s+/g, ' ').trim());
device.destroy();
