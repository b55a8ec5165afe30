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

/** `actual` holds exactly `expected`'s float32 bit patterns; a failure names the first differing element and how many
 *  differ (a diff of two long arrays would take the test runner minutes to print). */
export function expectSameBits(actual: Float32Array, expected: Float32Array, what = 'values'): void {
  if (actual.length !== expected.length)
    throw new Error(`${what}: ${actual.length} values, expected ${expected.length}`);
  const [a, e] = [actual, expected].map((x) => new Uint32Array(x.buffer, x.byteOffset, x.length));
  let first = -1;
  let count = 0;
  for (let i = 0; i < a.length; i++) {
    if (a[i] === e[i]) continue;
    if (first < 0) first = i;
    count++;
  }
  if (first >= 0)
    throw new Error(
      `${what}: ${count} of ${a.length} values differ, first element ${first}: ${actual[first]}, ` +
        `expected ${expected[first]}`,
    );
}

/** expectSameBits for every tensor of `expected`, and no other names in `actual`. */
export function expectSameTensorBits(
  actual: ReadonlyMap<string, Float32Array>,
  expected: ReadonlyMap<string, Float32Array>,
  what: string,
): void {
  if ([...actual.keys()].sort().join() !== [...expected.keys()].sort().join())
    throw new Error(`${what}: tensors ${[...actual.keys()].join(', ')}, expected ${[...expected.keys()].join(', ')}`);
  for (const [name, values] of expected) expectSameBits(actual.get(name)!, values, `${what}: ${name}`);
}
