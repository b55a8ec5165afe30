// `node tools/bench.js lm-head`: the fused LM head at Qwen's vocabulary (151,936) and hidden 128 and 1,024 —
// forward (log-prob + entropy) and backward (dhidden + dW, with the entropy term) — against plain matmuls of the
// same M×N×K in the same process: `vs_matmul` is the LM head's GFLOP/s over the matmuls' (on a software device
// from CPU time, which other processes on the cores barely move, unlike wall time). The matmuls run in the
// same vocabulary chunks the LM head binds (a 151,936 × 1,024 weight outgrows one binding), writing only a
// chunk of logits, so the ratio measures what the head adds: statistics, dlogits and their passes over memory.
// Then a decode step's full logits of 4 rows (lmHeadLogits, sampling's input) against the matmul route.
import { type Engine, seededRandom } from '../../engine/index.ts';
import { timeKernel, withVariant, type KernelBenchRow } from './harness.ts';
import { lmHeadForward, lmHeadBackward, lmHeadChunkWidth, lmHeadLogits } from '../../kernels/layers/lm-head.ts';
import { matmul } from '../../kernels/matmul/matmul.ts';

const VOCAB = 151936;
/** Rows (tokens) per case: a micro-batch's worth, fewer at hidden 1,024 so one run takes seconds on lavapipe. */
const CASES = [
  { N: 256, C: 128 },
  { N: 64, C: 1024 },
];
/** A decode step's rows: the sampling logits of 4 sequences. */
const DECODE_ROWS = 4;
/** Heavy runs: one per sample, three samples. */
const TIMING = { reps: 1, samples: 3 };

export interface LmHeadBenchRow extends KernelBenchRow {
  vs_matmul?: number;
}

function randomValues(n: number, seed: number, scale: number): Float32Array {
  const random = seededRandom(seed);
  return Float32Array.from({ length: n }, () => scale * (2 * random() - 1));
}

/** How much faster `row` runs the same FLOPs than `baseline`: by CPU time on a software device, else wall time. */
function speedup(baseline: KernelBenchRow, row: KernelBenchRow): number {
  return baseline.cpu_ms !== undefined && row.cpu_ms !== undefined
    ? baseline.cpu_ms / row.cpu_ms
    : baseline.ms / row.ms;
}

export async function benchmarkLmHead(engine: Engine): Promise<LmHeadBenchRow[]> {
  const rows: LmHeadBenchRow[] = [];
  for (const { N, C } of CASES) {
    const V = VOCAB;
    const shape = `N=${N} C=${C} V=${V}`;
    const random = seededRandom(N + C);
    const hidden = engine.tensorFrom('bench.hidden', [N, C], randomValues(N * C, 1, 1));
    const weight = engine.tensorFrom('bench.weight', [V, C], randomValues(V * C, 2, 0.05));
    const targets = engine.tensorFrom(
      'bench.targets',
      [N],
      Array.from({ length: N }, () => Math.floor(random() * V)),
      'u32',
    );
    const [logprobs, entropy, lse] = ['logprobs', 'entropy', 'lse'].map((name) => engine.tensor(`bench.${name}`, [N]));
    const dLogprobs = engine.tensorFrom('bench.dLogprobs', [N], randomValues(N, 3, 1));
    const dHidden = engine.tensor('bench.dHidden', [N, C]);
    const dWeight = engine.tensor('bench.dWeight', [V, C]);
    const common = { hidden, weight, targets, N, C, V, temperature: 1 };

    const chunk = lmHeadChunkWidth(engine, N, C, V);
    const logits = engine.tensor('bench.logits', [N, chunk]);
    const forEachChunk = (body: (v0: number, width: number) => void) => {
      for (let v0 = 0; v0 < V; v0 += chunk) body(v0, Math.min(chunk, V - v0));
    };
    const rowsOf = (t: typeof weight, v0: number, width: number) => t.view(`${t.name}[${v0}]`, v0 * C, [width, C]);
    const forwardMatmul = () =>
      forEachChunk((v0, width) => {
        matmul(engine, {
          a: hidden,
          b: rowsOf(weight, v0, width),
          out: logits.view('logits', 0, [N, width]),
          M: N,
          N: width,
          K: C,
          layout: 'nt',
        });
      });
    const backwardMatmuls = () =>
      forEachChunk((v0, width) => {
        const chunkLogits = logits.view('logits', 0, [N, width]);
        matmul(engine, {
          a: hidden,
          b: rowsOf(weight, v0, width),
          out: chunkLogits,
          M: N,
          N: width,
          K: C,
          layout: 'nt',
        });
        matmul(engine, {
          a: chunkLogits,
          b: rowsOf(weight, v0, width),
          out: dHidden,
          M: N,
          N: C,
          K: width,
          layout: 'nn',
          accumulate: v0 > 0,
        });
        matmul(engine, {
          a: chunkLogits,
          b: hidden,
          out: rowsOf(dWeight, v0, width),
          M: width,
          N: C,
          K: N,
          layout: 'tn',
          accumulate: true,
        });
      });

    const forwardFlops = 2 * N * C * V;
    const matmulForward = await timeKernel(engine, 'matmul nt (same chunks)', shape, forwardMatmul, {
      flops: forwardFlops,
      ...TIMING,
    });
    const headForward = await timeKernel(
      engine,
      'lm-head forward',
      shape,
      () => lmHeadForward(engine, { ...common, logprobs, entropy, lse }),
      { flops: forwardFlops, ...TIMING },
    );
    const matmulBackward = await timeKernel(engine, 'matmul nt+nn+tn (same chunks)', shape, backwardMatmuls, {
      flops: 3 * forwardFlops,
      ...TIMING,
    });
    const headBackward = await timeKernel(
      engine,
      'lm-head backward (entropy term)',
      shape,
      () => lmHeadBackward(engine, { ...common, lse, entropy, dLogprobs, dEntropy: dLogprobs, dHidden, dWeight }),
      { flops: 3 * forwardFlops, ...TIMING },
    );
    rows.push(matmulForward, { ...headForward, vs_matmul: speedup(matmulForward, headForward) }, matmulBackward, {
      ...headBackward,
      vs_matmul: speedup(matmulBackward, headBackward),
    });

    // A decode step's full logits: the device's choice (on a CPU the decode kernel) against the matmul route.
    const decodeShape = `N=${DECODE_ROWS} C=${C} V=${V}`;
    const decodeArgs = {
      hidden: hidden.view('bench.hidden[decode]', 0, [DECODE_ROWS, C]),
      weight,
      out: engine.tensor('bench.decodeLogits', [DECODE_ROWS, V]),
      N: DECODE_ROWS,
      C,
      V,
    };
    const decodeFlops = 2 * DECODE_ROWS * C * V;
    const matmulLogits = await withVariant(engine, 'lm-head-logits', 'matmul', () =>
      timeKernel(engine, 'matmul nt (decode logits)', decodeShape, () => lmHeadLogits(engine, decodeArgs), {
        flops: decodeFlops,
        ...TIMING,
      }),
    );
    const headLogits = await timeKernel(
      engine,
      'lm-head logits (decode)',
      decodeShape,
      () => lmHeadLogits(engine, decodeArgs),
      { flops: decodeFlops, ...TIMING },
    );
    rows.push(matmulLogits, { ...headLogits, vs_matmul: speedup(matmulLogits, headLogits) });
    for (const t of [
      hidden,
      weight,
      targets,
      logprobs,
      entropy,
      lse,
      dLogprobs,
      dHidden,
      dWeight,
      logits,
      decodeArgs.out,
    ])
      engine.destroyTensor(t);
  }
  return rows;
}
