import { describe, it, expect, afterAll, vi } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { Engine, readKnobs, type Tensor } from '../../engine/index.ts';
import {
  lmHeadForward,
  lmHeadBackward,
  lmHeadLogits,
  lmHeadLogitsVariants,
  lmHeadStatsVariants,
} from '../../kernels/layers/lm-head.ts';
import { lmHeadForwardRef, lmHeadBackwardRef } from '../../kernels/layers/lm-head.ref.ts';
import { randomArray, expectClose, seededRandom } from '../support/arrays.ts';

interface Case {
  N: number;
  C: number;
  V: number;
  temperature: number;
  chunkSize?: number;
  /** Backward with the entropy term; 'recompute' leaves the forward's entropy out so the backward rebuilds it. */
  entropyTerm: 'none' | 'given' | 'recompute';
  accumulateDHidden?: boolean;
  /** The forward keeps its logits for the backward (a vocabulary of one chunk). */
  savedLogits?: boolean;
}

const cases: Case[] = [
  { N: 1, C: 8, V: 7, temperature: 1, entropyTerm: 'given' },
  { N: 5, C: 12, V: 256, temperature: 0.7, entropyTerm: 'none' },
  { N: 5, C: 12, V: 256, temperature: 0.7, entropyTerm: 'none', savedLogits: true },
  { N: 37, C: 64, V: 999, temperature: 1.3, entropyTerm: 'given', savedLogits: true },
  { N: 7, C: 8, V: 130, temperature: 1, entropyTerm: 'recompute', savedLogits: true },
  { N: 37, C: 64, V: 1000, temperature: 1, entropyTerm: 'given', accumulateDHidden: true },
  { N: 37, C: 12, V: 1000, temperature: 0.7, chunkSize: 128, entropyTerm: 'recompute' },
  // Last chunks of width 44 (vec4) and 1 (scalar), a target in each.
  { N: 5, C: 8, V: 300, temperature: 0.7, chunkSize: 64, entropyTerm: 'given' },
  { N: 1, C: 64, V: 257, temperature: 1.3, chunkSize: 64, entropyTerm: 'recompute' },
];

const caseLabel = (c: Case) =>
  `N=${c.N}, C=${c.C}, V=${c.V}, T=${c.temperature}, chunk ${c.chunkSize ?? 'auto'}, entropy ` +
  `${c.entropyTerm}${c.savedLogits ? ', saved logits' : ''}`;

/** The forward (each stats variant) and the backward against the references. */
async function expectCaseMatches(engine: Engine, c: Case): Promise<void> {
  const { N, C, V, temperature, chunkSize, entropyTerm } = c;
  const random = seededRandom(N * 7919 + V);
  const hidden = randomArray(N * C, N + C + V);
  const weight = randomArray(V * C, V);
  const targets = Array.from({ length: N }, (_, n) => (n === 0 ? V - 1 : Math.floor(random() * V)));
  // Row 1 is padding: no upstream gradient at all.
  const dLogprobs = randomArray(N, 5).map((g, n) => (n === 1 ? 0 : g));
  const dEntropy = entropyTerm === 'none' ? null : randomArray(N, 6).map((g, n) => (n === 1 ? 0 : g));
  const gpuHidden = engine.tensorFrom('hidden', [N, C], hidden);
  const gpuWeight = engine.tensorFrom('weight', [V, C], weight);
  const gpuTargets = engine.tensorFrom('targets', [N], targets, 'u32');
  // Stale values where the forward's logits go: the backward must read what the forward left there.
  const args = {
    N,
    C,
    V,
    temperature,
    chunkSize,
    savedLogits: c.savedLogits ? engine.tensorFrom('savedLogits', [N, V], randomArray(N * V, 9)) : undefined,
  };
  const logprobs = engine.tensor('logprobs', [N]);
  const entropy = engine.tensor('entropy', [N]);
  const lse = engine.tensor('lse', [N]);
  const sumPiSquared = engine.tensor('sumPiSquared', [N]);
  const expected = lmHeadForwardRef({ ...args, hidden, weight, targets });
  for (const variant of lmHeadStatsVariants.map((v) => v.name)) {
    // Without Σπ² and with it (verl's calculate_sum_pi_squared), which must leave the other outputs as they were.
    for (const withSumPiSquared of [false, true]) {
      const label = `${variant}${withSumPiSquared ? ', with Σπ²' : ''}`;
      engine.knobs.kernelVariants['lm-head'] = variant;
      lmHeadForward(engine, {
        ...args,
        hidden: gpuHidden,
        weight: gpuWeight,
        targets: gpuTargets,
        logprobs,
        entropy,
        lse,
        sumPiSquared: withSumPiSquared ? sumPiSquared : undefined,
      });
      delete engine.knobs.kernelVariants['lm-head'];
      expectClose(await engine.read(lse), expected.lse, 1e-5, 1e-5, `lse (${label})`);
      expectClose(await engine.read(logprobs), expected.logprobs, 1e-5, 1e-5, `logprobs (${label})`);
      expectClose(await engine.read(entropy), expected.entropy, 1e-5, 1e-5, `entropy (${label})`);
      if (withSumPiSquared)
        expectClose(await engine.read(sumPiSquared), expected.sumPiSquared, 1e-5, 1e-5, `sumPiSquared (${label})`);
    }
  }

  const dHiddenBefore = randomArray(N * C, 7);
  const dWeightBefore = randomArray(V * C, 8);
  const dHidden = engine.tensorFrom('dHidden', [N, C], dHiddenBefore);
  const dWeight = engine.tensorFrom('dWeight', [V, C], dWeightBefore);
  lmHeadBackward(engine, {
    ...args,
    hidden: gpuHidden,
    weight: gpuWeight,
    targets: gpuTargets,
    lse,
    dLogprobs: engine.tensorFrom('dLogprobs', [N], dLogprobs),
    dEntropy: dEntropy && engine.tensorFrom('dEntropy', [N], dEntropy),
    entropy: entropyTerm === 'given' ? entropy : undefined,
    dHidden,
    dWeight,
    accumulateDHidden: c.accumulateDHidden,
  });
  const grads = lmHeadBackwardRef({ ...args, hidden, weight, targets, dLogprobs, dEntropy });
  const expectedDHidden = c.accumulateDHidden ? grads.dHidden.map((g, i) => g + dHiddenBefore[i]) : grads.dHidden;
  expectClose(await engine.read(dHidden), expectedDHidden, 1e-5, 1e-4, 'dHidden');
  expectClose(
    await engine.read(dWeight),
    grads.dWeight.map((g, i) => g + dWeightBefore[i]),
    1e-5,
    1e-4,
    'dWeight',
  );
}

/** lmHeadLogits against plain loops. */
async function expectLogitsMatch(engine: Engine, N: number, C: number, V: number): Promise<void> {
  const hidden = randomArray(N * C, 1);
  const weight = randomArray(V * C, 2);
  const out = engine.tensor('logits', [N, V]);
  lmHeadLogits(engine, {
    hidden: engine.tensorFrom('hidden', [N, C], hidden),
    weight: engine.tensorFrom('weight', [V, C], weight),
    out,
    N,
    C,
    V,
  });
  const expected = new Float64Array(N * V);
  for (let n = 0; n < N; n++)
    for (let v = 0; v < V; v++)
      for (let c = 0; c < C; c++) expected[n * V + v] += hidden[n * C + c] * weight[v * C + c];
  expectClose(await engine.read(out), expected, 1e-5, 1e-5, 'logits');
}

describe('fused LM head', () => {
  for (const c of cases) {
    it(`matches the reference (${caseLabel(c)})`, async () => expectCaseMatches(await gpuEngine(), c));
  }

  it('gives finite statistics and gradients for large logits at a low temperature', async () => {
    const engine = await gpuEngine();
    const [N, C, V, temperature] = [3, 8, 200, 0.05];
    const hidden = randomArray(N * C, 1, 20);
    const weight = randomArray(V * C, 2, 20);
    const targets = [0, 199, 64];
    const args = { N, C, V, temperature, chunkSize: 64 };
    const [gpuHidden, gpuWeight] = [
      engine.tensorFrom('hidden', [N, C], hidden),
      engine.tensorFrom('weight', [V, C], weight),
    ];
    const gpuTargets = engine.tensorFrom('targets', [N], targets, 'u32');
    const [logprobs, entropy, lse] = [
      engine.tensor('logprobs', [N]),
      engine.tensor('entropy', [N]),
      engine.tensor('lse', [N]),
    ];
    const sumPiSquared = engine.tensor('sumPiSquared', [N]);
    lmHeadForward(engine, {
      ...args,
      hidden: gpuHidden,
      weight: gpuWeight,
      targets: gpuTargets,
      logprobs,
      entropy,
      lse,
      sumPiSquared,
    });
    const expected = lmHeadForwardRef({ ...args, hidden, weight, targets });
    expectClose(await engine.read(lse), expected.lse, 1e-3, 1e-5, 'lse');
    // lse is in the thousands here: Σπ² = exp(lse(2z) − 2·lse(z)) carries an ulp of 2·lse (≈ 2e-4) as relative error.
    expectClose(await engine.read(sumPiSquared), expected.sumPiSquared, 1e-3, 1e-6, 'sumPiSquared');
    expectClose(await engine.read(logprobs), expected.logprobs, 1e-2, 1e-5, 'logprobs');
    expectClose(await engine.read(entropy), expected.entropy, 1e-4, 1e-3, 'entropy');
    const [dHidden, dWeight] = [engine.tensor('dHidden', [N, C]), engine.tensor('dWeight', [V, C])];
    const upstream = engine.tensorFrom('upstream', [N], [1, -0.5, 2]);
    lmHeadBackward(engine, {
      ...args,
      hidden: gpuHidden,
      weight: gpuWeight,
      targets: gpuTargets,
      lse,
      entropy,
      dLogprobs: upstream,
      dEntropy: upstream,
      dHidden,
      dWeight,
    });
    for (const g of [...(await engine.read(dHidden)), ...(await engine.read(dWeight))])
      expect(Number.isFinite(g)).toBe(true);
  });

  it(
    'Σπ² is the same whether the vocabulary comes in chunks or whole, and costs nothing unless asked ' + 'for',
    async () => {
      const engine = await gpuEngine();
      const [N, C, V, temperature] = [6, 16, 300, 0.8];
      const hidden = engine.tensorFrom('hidden', [N, C], randomArray(N * C, 3, 3));
      const weight = engine.tensorFrom('weight', [V, C], randomArray(V * C, 4, 3));
      const targets = engine.tensorFrom('targets', [N], [0, 299, 64, 65, 128, 7], 'u32');
      const outputs = () => ({
        logprobs: engine.tensor('logprobs', [N]),
        entropy: engine.tensor('entropy', [N]),
        lse: engine.tensor('lse', [N]),
      });
      const dispatches = vi.spyOn(engine, 'dispatch');
      const run = (chunkSize: number | undefined, sumPiSquared?: Tensor) => {
        dispatches.mockClear();
        lmHeadForward(engine, { hidden, weight, targets, N, C, V, temperature, chunkSize, ...outputs(), sumPiSquared });
        return dispatches.mock.calls.map(([spec]) => spec.name);
      };
      try {
        const [whole, chunked] = [engine.tensor('whole', [N]), engine.tensor('chunked', [N])];
        expect(run(undefined, whole).filter((name) => !name.startsWith('matmul'))).toEqual([
          ...run(undefined).filter((name) => !name.startsWith('matmul')),
          expect.stringMatching(/^lm-head\/stats/),
          'lm-head/sum-pi-squared',
        ]);
        // 5 chunks of 64 rows: one more stats pass each, then one dispatch for Σπ².
        const plain = run(64);
        expect(run(64, chunked)).toHaveLength(plain.length + 5 + 1);
        // The chunks merge the running sums in another order: the two agree to float32 rounding of lse (≈ 1e-5
        // relative).
        expectClose(
          await engine.read(chunked),
          await engine.read(whole),
          1e-6,
          3e-5,
          'Σπ², chunks of 64 against one chunk',
        );
      } finally {
        dispatches.mockRestore();
      }
    },
  );

  // Each variant forced: 'decode' runs its kernel for up to 4 rows with C % 4 == 0 (odd V: a last workgroup of
  // clamped weight rows; N = 3: a clamped hidden row) and the matmul otherwise.
  for (const variant of lmHeadLogitsVariants.map((v) => v.name)) {
    for (const [N, C, V] of [
      [3, 12, 50],
      [1, 64, 1000],
      [4, 8, 77],
      [6, 16, 300],
      [2, 10, 65],
    ]) {
      it(`lmHeadLogits writes the full logits without temperature (${variant}, N=${N}, C=${C}, V=${V})`, async () => {
        const engine = await gpuEngine();
        engine.knobs.kernelVariants['lm-head-logits'] = variant;
        try {
          await expectLogitsMatch(engine, N, C, V);
        } finally {
          delete engine.knobs.kernelVariants['lm-head-logits'];
        }
      });
    }
  }
});

// The LM head as a GPU runs it: its chunks' matmuls on the gpu matmul (narrow tiles at these sizes; the wide
// ones are the same code, test/webgpu/matmul.test.ts), the decode logits through the matmul, and a 16 KiB
// binding limit, so the weight is multiplied in chunks of 64 rows (C = 64) and the full logits window by window.
describe('fused LM head under the GPU variants, split into binding windows', () => {
  let engine: Engine | null = null;
  afterAll(() => engine?.destroy());
  const gpuEngineSplit = async () => {
    engine ??= await Engine.create({
      ...readKnobs(),
      maxBindingBytes: 16384,
      kernelVariants: { matmul: 'gpu', 'lm-head-logits': 'matmul' },
    });
    return engine;
  };
  for (const c of [cases[5], cases[7], cases[8]]) {
    it(`matches the reference (${caseLabel(c)})`, async () => expectCaseMatches(await gpuEngineSplit(), c));
  }
  it('lmHeadLogits writes the full logits (N=3, C=64, V=1000)', async () =>
    expectLogitsMatch(await gpuEngineSplit(), 3, 64, 1000));
});
