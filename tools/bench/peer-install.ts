// What the peer benchmarks (TF.js in peers.ts, jax-js in gpu-report.ts) share: the peer is no dependency of the
// project, so it is installed into a temporary folder on each run (npm registry needed) unless an environment
// variable names a folder where it already is; and it must run on the engine's Dawn instance, handed to it as a
// browser's navigator.gpu (Node has no navigator), so both run on the same adapter.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findGpu } from '../../engine/device.ts';

/** A folder whose node_modules holds `packages` (name@version): `$envVar` when it has `probe` (a package name),
 *  else a new temporary folder they are installed into. Throws when npm fails (no registry). */
export function peerFolder(envVar: string, packages: readonly string[], probe: string): string {
  let dir = process.env[envVar];
  if (!dir || !existsSync(join(dir, 'node_modules', ...probe.split('/')))) {
    dir = dir ?? mkdtempSync(join(tmpdir(), 'bench-peer-'));
    console.error(`installing ${packages.join(' ')} into ${dir} (set ${envVar}=${dir} to reuse it)`);
    execFileSync('npm', ['install', '--no-save', '--prefix', dir, ...packages], {
      stdio: ['ignore', 'inherit', 'inherit'],
    });
  }
  return dir;
}

/** navigator.gpu as the engine's Dawn instance (and a userAgent, which browser libraries read at load). */
export async function shareDawnWithPeers(): Promise<void> {
  const nav = ((globalThis as { navigator?: object }).navigator ??= {}) as { gpu?: GPU; userAgent?: string };
  nav.gpu ??= await findGpu();
  nav.userAgent ??= `Node.js/${process.version}`;
}
