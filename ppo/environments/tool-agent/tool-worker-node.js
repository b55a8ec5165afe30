// Entry of a custom tool's worker thread (tool-thread-node.ts starts it). Plain JavaScript because Node 20 starts a
// worker without the loaders its parent registered: this file registers tsx as tools/node-loader.js does, so the
// user's tool module may be .ts as well as .js/.mjs, then runs the worker's TypeScript body.
import { register } from 'tsx/esm/api';

register();
await import('./tool-worker-node.ts');
