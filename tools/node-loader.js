// Lets Node run the TypeScript sources directly: tsx for .ts, plus .wgsl files imported as strings
// (the same contract as tools/vite-wgsl-plugin.ts for Vite, so one source tree serves Node and browser).
import { register } from 'node:module';
import { register as registerTsx } from 'tsx/esm/api';

registerTsx();
register('./wgsl-hooks.js', import.meta.url);
