// The run's seeded random source (shared by models/ and ppo/): small (one 32-bit state word), fast, and
// serialisable, so a checkpoint can store it and a resumed run draws exactly the numbers an uninterrupted one would.

export class SeededRng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform in [0, 1) (Mulberry32). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** A 32-bit seed for a GPU kernel or a child generator. */
  seed32(): number {
    return Math.floor(this.next() * 4294967296) >>> 0;
  }

  getState(): number {
    return this.state;
  }

  setState(state: number): void {
    this.state = state >>> 0;
  }
}

/** A plain function view of a fresh generator, for code that only draws. */
export function seededRandom(seed: number): () => number {
  const rng = new SeededRng(seed);
  return () => rng.next();
}
