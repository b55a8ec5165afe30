// Text sources imported as strings: WGSL shaders and the YAML config layers under examples/.
import { readFile } from 'node:fs/promises';

export async function load(url, context, nextLoad) {
  if (/\.(wgsl|yaml)$/.test(new URL(url).pathname)) {
    const text = await readFile(new URL(url), 'utf8');
    return { format: 'module', source: `export default ${JSON.stringify(text)};`, shortCircuit: true };
  }
  return nextLoad(url, context);
}
