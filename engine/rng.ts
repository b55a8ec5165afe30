// The run's seeded random stream (shared by models/ and ppo/): xoshiro128** (four u32 words of state), seeded through
// splitmix32. The state is plain numbers, so the trainer saves it with a checkpoint and restores it for a bit-identical
// resume.

export type RngState = [number, number, number, number];

function splitmix32(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
}

export class Rng {
  private s: RngState;

  constructor(seed: number) {
    const next = splitmix32(seed);
    this.s = [next(), next(), next(), next()];
  }

  static fromState(state: RngState): Rng {
    if (
      state.length !== 4 ||
      state.every((w) => w === 0) ||
      !state.every((w) => Number.isInteger(w) && w >= 0 && w <= 0xffffffff)
    ) {
      throw new Error(`rng state must be four u32 words, not all zero; got [${state.join(', ')}]`);
    }
    const rng = new Rng(0);
    rng.s = [...state];
    return rng;
  }

  /** Continues from a saved state (a resumed run draws what the uninterrupted one would have). */
  setState(state: RngState): void {
    this.s = [...Rng.fromState(state).s];
  }

  state(): RngState {
    return [...this.s];
  }

  nextUint32(): number {
    const s = this.s;
    const result = Math.imul(rotl(Math.imul(s[1], 5) >>> 0, 7), 9) >>> 0;
    const t = (s[1] << 9) >>> 0;
    s[2] = (s[2] ^ s[0]) >>> 0;
    s[3] = (s[3] ^ s[1]) >>> 0;
    s[1] = (s[1] ^ s[2]) >>> 0;
    s[0] = (s[0] ^ s[3]) >>> 0;
    s[2] = (s[2] ^ t) >>> 0;
    s[3] = rotl(s[3], 11);
    return result;
  }

  /** Uniform in [0, 1) with 32 random bits. */
  next(): number {
    return this.nextUint32() / 4294967296;
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}

/** A plain function view of a fresh generator, for code that only draws uniforms. */
export function seededRandom(seed: number): () => number {
  const rng = new Rng(seed);
  return () => rng.next();
}
