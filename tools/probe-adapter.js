// Prints the WebGPU adapter's description and exits 0, or exits 1 when none is usable. tools/setup.sh runs it,
// so Dawn's known-harmless start-up lines are filtered here as in train.js (engine/native-stderr-node.ts).
import './node-loader.js';

async function probe() {
  const { create, globals } = await import('webgpu');
  Object.assign(globalThis, globals);
  const gpu = create([]);
  const adapter = await gpu.requestAdapter();
  if (!adapter) return 1;
  const device = await adapter.requestDevice();
  const info = adapter.info;
  console.log(`${info.vendor} ${info.architecture} ${info.device} ${info.description}`.replace(/\s+/g, ' ').trim());
  device.destroy();
  return 0;
}

const { runWithFilteredStderr } = await import('../engine/native-stderr-node.ts');
process.exitCode = (await runWithFilteredStderr()) ?? (await probe());
