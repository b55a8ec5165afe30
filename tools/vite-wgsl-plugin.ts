// WGSL sources imported as strings (`import src from './op.wgsl'`) in Vite: the vitest config and the demo's
// build share this plugin, and tools/wgsl-hooks.js gives Node the same contract.
import type { Plugin } from 'vite';

export const wgslAsString: Plugin = {
  name: 'wgsl-as-string',
  transform(code, id) {
    if (id.endsWith('.wgsl')) return { code: `export default ${JSON.stringify(code)};`, map: null };
    return undefined;
  },
};
