// WGSL sources and YAML config layers imported as strings (`import src from './op.wgsl'`) in Vite: the vitest config
// and the demo's build share this plugin, and tools/wgsl-hooks.js gives Node the same contract.
import type { Plugin } from 'vite';

export const wgslAsString: Plugin = {
  name: 'wgsl-as-string',
  transform(code, id) {
    if (/\.(wgsl|yaml)$/.test(id)) return { code: `export default ${JSON.stringify(code)};`, map: null };
    return undefined;
  },
};
