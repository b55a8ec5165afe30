// Entry of the custom reward's worker thread (custom-reward-node.ts starts it). Plain JavaScript because Node 20
// starts a worker without the loaders its parent registered: this file registers tsx as tools/node-loader.js
// does, so the user's module may be .ts as well as .js/.mjs, then runs the worker's TypeScript body. The
// WGSL/YAML text hooks of node-loader.js serve the engine's own sources, which a reward module does not load.
import { register } from 'tsx/esm/api';

register();
await import('./custom-reward-worker-node.ts');
