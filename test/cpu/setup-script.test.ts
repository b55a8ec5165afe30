// tools/setup.sh's choices, from its functions (sourcing the script defines them and runs nothing): which lavapipe
// each OS gets, and the Debian mirror read from the machine's own apt sources rather than a host named in the script.
import { describe, it, expect } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '../support/import-graph.ts';
import { makeTempDirSync } from '../support/temp-dir.ts';

const SCRIPT = join(REPO_ROOT, 'tools/setup.sh');

/** Runs `source tools/setup.sh; <call>` in bash: stdout, and whether it succeeded. */
function call(command: string): { ok: boolean; out: string } {
  try {
    return { ok: true, out: execFileSync('bash', ['-c', `source "${SCRIPT}"; ${command}`], { encoding: 'utf8' }) };
  } catch (err) {
    return { ok: false, out: String((err as { stdout?: string }).stdout ?? '') };
  }
}

const dir = makeTempDirSync('setup-script-');
function osRelease(name: string, fields: Record<string, string>): string {
  const file = join(dir, name);
  writeFileSync(
    file,
    `${Object.entries(fields)
      .map(([k, v]) => `${k}="${v}"`)
      .join('\n')}\n`,
  );
  return file;
}
const DEBIAN_12 = osRelease('debian12', {
  PRETTY_NAME: 'Debian GNU/Linux 12 (bookworm)',
  ID: 'debian',
  VERSION_CODENAME: 'bookworm',
});
const DEBIAN_13 = osRelease('debian13', {
  PRETTY_NAME: 'Debian GNU/Linux 13 (trixie)',
  ID: 'debian',
  VERSION_CODENAME: 'trixie',
});
const UBUNTU_2204 = osRelease('ubuntu2204', {
  PRETTY_NAME: 'Ubuntu 22.04.4 LTS',
  ID: 'ubuntu',
  VERSION_CODENAME: 'jammy',
});
const UBUNTU_2404 = osRelease('ubuntu2404', {
  PRETTY_NAME: 'Ubuntu 24.04.1 LTS',
  ID: 'ubuntu',
  VERSION_CODENAME: 'noble',
});

describe('tools/setup.sh: lavapipe per OS', () => {
  it("takes the distribution's own Mesa when it is 24 or newer", () => {
    expect(call(`lavapipe_plan ${DEBIAN_13} 25.0.7-2`).out.trim()).toBe('distro');
    expect(call(`lavapipe_plan ${UBUNTU_2404} 24.0.5-1ubuntu1`).out.trim()).toBe('distro');
  });

  it('adds bookworm-backports on Debian 12, whose Mesa 22.3 Dawn rejects', () => {
    expect(call(`lavapipe_plan ${DEBIAN_12} 22.3.6-1+deb12u1`).out.trim()).toBe('bookworm-backports');
  });

  it('adds no Debian sources on an older Ubuntu: it says what to do instead', () => {
    const plan = call(`lavapipe_plan ${UBUNTU_2204} 23.2.1-1ubuntu3.1~22.04.2`).out.trim();
    expect(plan).toMatch(/^unsupported: Ubuntu 22\.04\.4 LTS offers mesa-vulkan-drivers 23\.2\.1.*Mesa 24 or newer/);
  });
});

describe("tools/setup.sh: the Debian mirror comes from the machine's apt sources", () => {
  it('names no mirror host itself', () => {
    expect(readFileSync(SCRIPT, 'utf8')).not.toMatch(/https?:\/\//);
  });

  it('reads a deb822 .sources file, skipping security and backports stanzas', () => {
    const apt = join(dir, 'apt-deb822');
    mkdirSync(join(apt, 'sources.list.d'), { recursive: true });
    writeFileSync(
      join(apt, 'sources.list.d', 'debian.sources'),
      [
        'Types: deb',
        'URIs: http://mirror.invalid/debian-security',
        'Suites: bookworm-security',
        'Components: main',
        '',
        'Types: deb',
        '# a comment line',
        'URIs: http://mirror.invalid/debian',
        'Suites: bookworm bookworm-updates',
        'Components: main',
      ].join('\n'),
    );
    expect(call(`debian_mirror ${apt}`)).toEqual({ ok: true, out: 'http://mirror.invalid/debian\n' });
  });

  it('reads a one-line sources.list entry with options', () => {
    const apt = join(dir, 'apt-list');
    mkdirSync(apt, { recursive: true });
    writeFileSync(
      join(apt, 'sources.list'),
      'deb http://mirror.invalid/debian bookworm-backports main\n' +
        'deb [arch=amd64 signed-by=/k.gpg] https://other.invalid/debian/ bookworm main contrib\n',
    );
    expect(call(`debian_mirror ${apt}`)).toEqual({ ok: true, out: 'https://other.invalid/debian/\n' });
  });

  it('fails when the sources name no Debian mirror', () => {
    const apt = join(dir, 'apt-none');
    mkdirSync(apt, { recursive: true });
    writeFileSync(join(apt, 'sources.list'), 'deb http://archive.invalid/ubuntu jammy main\n');
    expect(call(`debian_mirror ${apt}`).ok).toBe(false);
  });
});
