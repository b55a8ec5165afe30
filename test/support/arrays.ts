// Deterministic data and comparisons shared by CPU and GPU tests. The closeness measure is the kernel labs' own.
import { maxViolation } from '../../tools/kernel-lab/compare.ts';

/** Mulberry32: small, seeded, reproducible. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function randomArray(n: number, seed: number, scale = 1): Float32Array {
  const random = seededRandom(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = (random() * 2 - 1) * scale;
  return out;
}

export function expectClose(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  atol: number,
  rtol: number,
  what = 'values',
): void {
  const v = maxViolation(actual, expected, atol, rtol);
  if (v > 1) {
    let at = 0;
    let worst = -1;
    for (let i = 0; i < actual.length; i++) {
      const e = Math.abs(actual[i] - expected[i]) / (atol + rtol * Math.abs(expected[i]));
      if (!(e <= worst)) {
        worst = Number.isNaN(e) ? Infinity : e;
        at = i;
      }
    }
    throw new Error(
      `${what}: element ${at} is ${actual[at]}, expected ${expected[at]} (atol ${atol}, rtol ${rtol}, ` +
        `${v.toFixed(2)}x over)`,
    );
  }
}
