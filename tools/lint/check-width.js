#!/usr/bin/env node
// The line width Biome cannot enforce: WGSL (no formatter knows it) and comments (Biome formats code, not prose),
// both at most 120 characters as Biome's code is. Prints each long line as FILE:LINE and exits 1 if there is one.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const WIDTH = 120;
const files = execFileSync('git', ['ls-files', '*.wgsl', '*.ts', '*.js'], { encoding: 'utf8' })
  .split('\n')
  .filter(Boolean);
const long = [];
for (const file of files) {
  const wgsl = file.endsWith('.wgsl');
  readFileSync(file, 'utf8')
    .split('\n')
    .forEach((line, i) => {
      if ([...line].length > WIDTH && (wgsl || /^\s*(\/\/|\*|\/\*)/.test(line))) long.push(`${file}:${i + 1}`);
    });
}
for (const where of long) console.error(`${where}: longer than ${WIDTH} characters`);
if (long.length > 0) console.error(`check-width: ${long.length} line(s) over ${WIDTH} characters (WGSL and comments)`);
process.exitCode = long.length > 0 ? 1 : 0;
