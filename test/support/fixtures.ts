// Paths into ../shared/fixtures (outside truth, never copied into the project).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const FIXTURES_DIR = fileURLToPath(new URL('../../../shared/fixtures/', import.meta.url));

export function fixturePath(relative: string): string {
  return FIXTURES_DIR + relative;
}

export function readFixtureJson<T = any>(relative: string): T {
  return JSON.parse(readFileSync(fixturePath(relative), 'utf8')) as T;
}
