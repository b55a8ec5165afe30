// forward_kl_topk's training path on the GPU against the float64 port of verl's compute_forward_kl_topk
// (kernels/ppo/distillation-loss.ref.ts, whose logits gradient test/cpu/distillation-loss.test.ts checks by central
// differences): the KL and masses from the student's hidden states (forward-kl-topk/kl), the loss clamped and
// aggregated (distillation-loss, precomputed), and its gradient back through the fused LM head's sparse pairs
// (forward-kl-topk/pairs, lm-head-sparse) into dHidden and dWeight, vocabulary chunks and the target among the
// teacher's ids included, also with the LM head split into binding windows and across buffers; with a float32 head and
// with a bf16 or f16 one (mixed precision's compute copy: the reference then multiplies by the head rounded to
// nearest even, float32 hidden states and gradients as the run's); and a teacher's top-k (CausalLm.topLogprobs) against
// its full logits.
import { describe, it, expect, onTestFinished } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { Arena, Engine, readKnobs, roundToHalf, type FloatDType } from '../../engine/index.ts';
import { expectClose, randomArray, seededRandom } from '../support/arrays.ts';
import { lmHeadBackward, lmHeadForward } from '../../kernels/layers/lm-head.ts';
import { forwardKlTopkGpu, forwardKlTopkPairsGpu } from '../../kernels/ppo/forward-kl-topk.ts';
import { computeDistillationLossGpu, distillationPartialTotals } from '../../kernels/ppo/distillation-loss.ts';
import { combineDistillationRef, forwardKlTopkRef } from '../../kernels/ppo/distillation-loss.ref.ts';
import { scatterResponseGradsGpu } from '../../kernels/ppo/response-grads.ts';
import { localAggregation } from '../../kernels/ppo/agg-loss.ref.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { tinyQwen3Config } from '../../models/presets.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { initialParameters } from '../../models/init.ts';
import { tokenArrays } from '../../models/token-batch.ts';

const m = 3;
const S = 7;
const R = 4;
const C = 8;
const K = 6;
const temperature = 0.8;
const floor = -4.5;
const coef = 0.7;
const N = m * S;
// Row 1 ends early; row 2 has an interior gap (a multi-turn observation).
const MASK = Float32Array.from([1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 1, 1]);

describe('forward_kl_topk on the GPU vs float64', () => {
  // The last two cases split the head (600 rows of 32 bytes) as a real vocabulary splits on a real device: an
  // engine binding at most 8 KiB reads it in 3 windows of at most 256 rows, one whose largest buffer is 16 KiB also
  // keeps it (and its gradient) in 2 buffers; both must match the same float64 values as the unsplit engine.
  for (const [V, chunkSize, limits] of [
    [50, undefined, null],
    [150, 64, null],
    [600, 64, { maxBindingBytes: 8192, maxBufferBytes: null }],
    [600, 64, { maxBindingBytes: 8192, maxBufferBytes: 16384 }],
  ] as const)
    for (const dtype of ['f32', 'bf16', 'f16'] as FloatDType[]) {
      const split = limits
        ? `, binding ≤ ${limits.maxBindingBytes} B${limits.maxBufferBytes ? `, buffers ≤ ${limits.maxBufferBytes} B` : ''}`
        : '';
      it(`KL, masses, loss and the gradient into dHidden and dWeight (${dtype} head, V=${V}, LM head chunk ${chunkSize ?? 'auto'}${split})`, async () => {
        const engine = limits ? await Engine.create({ ...readKnobs(), ...limits }) : await gpuEngine();
        onTestFinished(() => {
          if (limits) engine.destroy();
        });
        const random = seededRandom(7);
        const hidden = randomArray(N * C, 1);
        // The head as the kernels read it: float32, or rounded to nearest even in a half-precision copy.
        const master = randomArray(V * C, 2).map((w) => 3 * w);
        const weight = dtype === 'f32' ? master : roundToHalf(dtype, master);
        const targets = Array.from({ length: N }, () => Math.floor(random() * V));
        // Each token's teacher: the top K of a random distribution, one of them the sampled token.
        const ids = new Uint32Array(m * R * K);
        const teacherLogProbs = new Float32Array(m * R * K);
        for (let i = 0; i < m * R; i++) {
          const logits = Array.from({ length: V }, () => 3 * (random() * 2 - 1));
          const position = Math.floor(i / R) * S + S - R - 1 + (i % R);
          logits[targets[position]] = 4;
          const max = Math.max(...logits);
          const lse = max + Math.log(logits.reduce((a, z) => a + Math.exp(z - max), 0));
          const top = logits.map((_, j) => j).sort((a, b) => logits[b] - logits[a]);
          for (let k = 0; k < K; k++) {
            ids[i * K + k] = top[k];
            teacherLogProbs[i * K + k] = logits[top[k]] - lse;
          }
        }

        // float64: the student's logits / T at each token's position, verl's KL and its gradient.
        const position = (i: number) => Math.floor(i / R) * S + S - R - 1 + (i % R);
        const refs = Array.from({ length: m * R }, (_, i) => {
          const p = position(i);
          const z = Array.from({ length: V }, (_, v) => {
            let dot = 0;
            for (let c = 0; c < C; c++) dot += hidden[p * C + c] * weight[v * C + c];
            return dot / temperature;
          });
          return forwardKlTopkRef(z, teacherLogProbs.subarray(i * K, i * K + K), ids.subarray(i * K, i * K + K), floor);
        });
        const kls = refs.map((r) => r.loss);
        const valid = kls.filter((_, i) => MASK[i] === 1).sort((a, b) => a - b);
        // A clamp between the losses: some tokens pass no gradient.
        const clamp = (valid[3] + valid[4]) / 2;
        const aggregation = localAggregation('seq-mean-token-mean', MASK, m, R);
        const zeros = new Float64Array(m * R);
        const combined = combineDistillationRef({
          losses: kls,
          lossGrad: Float64Array.from(kls, () => 1),
          logProb: zeros,
          oldLogProb: zeros,
          responseMask: MASK,
          aggregation,
          usePolicyGradient: false,
          lossMaxClamp: clamp,
          clipRatioLow: 0.2,
          clipRatioHigh: 0.2,
          B: m,
          T: R,
        });
        const dLogits = new Float64Array(N * V);
        refs.forEach((r, i) => {
          const u = coef * combined.gradLogProb[i];
          for (let v = 0; v < V; v++) dLogits[position(i) * V + v] += (u * r.gradLogits[v]) / temperature;
        });
        expect(combined.gradLogProb.filter((g) => g !== 0).length).toBeGreaterThan(2);
        expect(combined.gradLogProb.filter((g, i) => g === 0 && MASK[i] === 1).length).toBeGreaterThan(2);
        const dHiddenRef = new Float64Array(N * C);
        const dWeightRef = new Float64Array(V * C);
        for (let n = 0; n < N; n++)
          for (let v = 0; v < V; v++)
            for (let c = 0; c < C; c++) {
              dHiddenRef[n * C + c] += dLogits[n * V + v] * weight[v * C + c];
              dWeightRef[v * C + c] += dLogits[n * V + v] * hidden[n * C + c];
            }

        const t = (name: string, data: ArrayLike<number>) => engine.tensorFrom(name, [data.length], data);
        const gpuHidden = t('hidden', hidden);
        // The head and its gradient in an arena, split across buffers where the engine's largest buffer is below them.
        const head = new Arena(
          engine,
          'head',
          Arena.plan(engine, [
            { name: 'weight', shape: [V, C], dtype },
            { name: 'dWeight', shape: [V, C] },
          ]),
        );
        const gpuWeight = head.get('weight');
        engine.upload(gpuWeight, master);
        if (limits?.maxBufferBytes) expect(gpuWeight.parts.length).toBe(2);
        // 32 bytes a float32 row, 16 a half one: 3 windows of at most 256 rows, or 2 of at most 512.
        if (limits) expect(engine.bindingWindows(gpuWeight, C)).toHaveLength(dtype === 'f32' ? 3 : 2);
        const gpuTargets = engine.tensorFrom('targets', [N], targets, 'u32');
        const lse = engine.tensor('lse', [N]);
        const shape = { N, C, V, temperature, chunkSize };
        lmHeadForward(engine, {
          ...shape,
          hidden: gpuHidden,
          weight: gpuWeight,
          targets: gpuTargets,
          logprobs: engine.tensor('logprobs', [N]),
          entropy: engine.tensor('entropy', [N]),
          lse,
        });
        const out = engine.tensor('out', [3 * m * R]);
        const coefs = engine.tensor('coefs', [m * R * K]);
        const gpuIds = engine.tensorFrom('ids', [m * R * K], ids, 'u32');
        const mask = t('mask', MASK);
        const topk = { m, S, R, C, K, temperature, logProbMinClamp: floor };
        forwardKlTopkGpu(
          engine,
          {
            hidden: gpuHidden,
            weight: gpuWeight,
            lse,
            teacherIds: gpuIds,
            teacherLogProbs: t('teacherLogProbs', teacherLogProbs),
            responseMask: mask,
            out,
            coefs,
          },
          topk,
        );
        const outs = await engine.read(out);
        const masked = (values: number[]) => values.map((v, i) => v * MASK[i]);
        expectClose(outs.subarray(0, m * R), masked(kls), 1e-5, 1e-4, 'KL');
        expectClose(outs.subarray(m * R, 2 * m * R), masked(refs.map((r) => r.studentMass)), 1e-5, 1e-4, 'student');
        expectClose(outs.subarray(2 * m * R), masked(refs.map((r) => r.teacherMass)), 1e-5, 1e-4, 'teacher mass');

        const grads = engine.tensor('grads', [2 * m * R]);
        const rowPartials = engine.tensor('partials', [8 * m]);
        const lossGrad = engine.tensor('lossGrad', [m * R]);
        computeDistillationLossGpu(
          engine,
          {
            logProb: t('lp', zeros),
            oldLogProb: t('old', zeros),
            teacher: out.view('out.kl', 0, [m, R]),
            responseMask: mask,
            isWeights: null,
            grads,
            rowPartials,
            lossGrad,
          },
          {
            lossMode: 'precomputed',
            usePolicyGradient: false,
            lossMaxClamp: clamp,
            clipRatioLow: 0.2,
            clipRatioHigh: 0.2,
            coef,
            accumulate: false,
            aggregation,
            B: m,
            T: R,
          },
        );
        expect(distillationPartialTotals(await engine.read(rowPartials), m).loss).toBeCloseTo(combined.loss, 5);
        const pairIds = engine.tensor('pairIds', [N * (K + 1)], 'u32');
        const pairCoefs = engine.tensor('pairCoefs', [N * (K + 1)]);
        forwardKlTopkPairsGpu(
          engine,
          { lossGrad, coefs, teacherIds: gpuIds, targets: gpuTargets, grads, pairIds, pairCoefs },
          topk,
        );
        const dLogprobs = engine.tensor('dLogprobs', [N]);
        scatterResponseGradsGpu(engine, { grads, dLogprobs, dEntropy: engine.tensor('dEntropy', [N]), B: m, S, T: R });
        const dHidden = engine.tensor('dHidden', [N * C]);
        const dWeight = head.get('dWeight');
        lmHeadBackward(engine, {
          ...shape,
          hidden: gpuHidden,
          weight: gpuWeight,
          targets: gpuTargets,
          lse,
          dLogprobs,
          dEntropy: null,
          dHidden,
          dWeight,
          extraLogitGrads: { ids: pairIds, coefs: pairCoefs, P: K + 1 },
        });
        expectClose(await engine.read(dHidden), dHiddenRef, 1e-6, 1e-4, 'dHidden');
        expectClose(await engine.read(dWeight), dWeightRef, 1e-6, 1e-4, 'dWeight');
      });
    }

  it("a teacher's top-k and log-probs at every position are those of its full logits", async () => {
    const engine = await gpuEngine();
    const V = 50;
    const config = tinyQwen3Config(V, { layers: 1, hidden: 32, heads: 2, kvHeads: 1, headDim: 16, intermediate: 64 });
    const params = createParameterArena(engine, config, 'teacher');
    uploadArenaTensors(engine, params, initialParameters(config, 3, 0.3));
    const model = new CausalLm(engine, config, params);
    const random = seededRandom(4);
    const rows = Array.from({ length: 2 }, () => Array.from({ length: S }, () => 1 + Math.floor(random() * (V - 1))));
    const host = tokenArrays(
      {
        inputIds: rows,
        attentionMask: rows.map((r) => r.map(() => 1)),
        positionIds: rows.map((r) => r.map((_, i) => i)),
      },
      V,
    );
    const batch = {
      B: 2,
      T: S,
      hostIds: host.ids,
      vocabSize: V,
      ids: engine.tensorFrom('ids', [2 * S], host.ids, 'u32'),
      positions: engine.tensorFrom('positions', [2 * S], host.positions, 'i32'),
      keyMask: engine.tensorFrom('keyMask', [2 * S], host.mask, 'u32'),
    };
    const logits = await engine.read(model.logits(batch, engine.tensor('logits', [2 * S, V])));
    const ids = engine.tensor('topIds', [2 * S, K], 'u32');
    const logProbs = engine.tensor('topLogProbs', [2 * S, K]);
    // Chunks of 8 positions (32 floats of hidden each: 256-byte aligned): the last chunk is short.
    model.topLogprobs(batch, K, ids, logProbs, 9);
    const gotIds = await engine.read(ids);
    const gotLogProbs = await engine.read(logProbs);
    for (let r = 0; r < 2 * S; r++) {
      const row = Array.from(logits.subarray(r * V, (r + 1) * V));
      const max = Math.max(...row);
      const lse = max + Math.log(row.reduce((a, z) => a + Math.exp(z - max), 0));
      const order = row.map((_, j) => j).sort((a, b) => row[b] - row[a] || a - b);
      expect(Array.from(gotIds.subarray(r * K, (r + 1) * K)), `row ${r}`).toEqual(order.slice(0, K));
      expectClose(
        gotLogProbs.subarray(r * K, (r + 1) * K),
        order.slice(0, K).map((j) => row[j] - lse),
        1e-5,
        1e-5,
      );
    }
  });
});
