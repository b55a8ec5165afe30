import { readFile } from 'node:fs/promises';

export async function load(url, context, nextLoad) {
  if (new URL(url).pathname.endsWith('.wgsl')) {
    const text = await readFile(new URL(url), 'utf8');
    return { format: 'module', source: `export default ${JSON.stringify(text)};`, shortCircuit: true };
  }
  return nextLoad(url, context);
}
