// torch.randperm(n) on the CPU after torch.manual_seed(seed), for the verl cases whose outcome a random draw decides
// (clip_cov's pick): torch's CPU generator is MT19937 seeded with the seed's low 32 bits, and randperm_cpu swaps
// r[i] with r[i + random() % (n − i)] for i = 0 … n − 2. Only right when verl's recording seeded just before the
// call; the harness uses it when a case carries a seed.

function mt19937(seed: number): () => number {
  const state = new Uint32Array(624);
  state[0] = seed >>> 0;
  for (let i = 1; i < 624; i++) {
    const prev = state[i - 1] ^ (state[i - 1] >>> 30);
    state[i] = (Math.imul(1812433253, prev) + i) >>> 0;
  }
  let index = 624;
  return () => {
    if (index >= 624) {
      for (let i = 0; i < 624; i++) {
        const y = (state[i] & 0x80000000) | (state[(i + 1) % 624] & 0x7fffffff);
        state[i] = state[(i + 397) % 624] ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0);
      }
      index = 0;
    }
    let y = state[index++];
    y ^= y >>> 11;
    y = (y ^ ((y << 7) & 0x9d2c5680)) >>> 0;
    y = (y ^ ((y << 15) & 0xefc60000)) >>> 0;
    y ^= y >>> 18;
    return y >>> 0;
  };
}

export function torchRandperm(n: number, seed: number): number[] {
  const random = mt19937(seed);
  const r = Array.from({ length: n }, (_, i) => i);
  for (let i = 0; i < n - 1; i++) {
    const z = random() % (n - i);
    [r[i], r[z + i]] = [r[z + i], r[i]];
  }
  return r;
}

/** The first outputs of MT19937(seed), for checking the generator against its published values. */
export function mt19937Outputs(seed: number, count: number): number[] {
  const random = mt19937(seed);
  return Array.from({ length: count }, () => random());
}
