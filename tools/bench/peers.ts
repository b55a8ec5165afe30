// `node tools/bench.js peers`: the tiny benchmark config's training step (batch 8 × 128, forward, cross-entropy,
// backward, AdamW with clipping) and generation (8 prompts of 16 tokens, 112 new tokens, KV cache, sampled at
// temperature 1) in this engine and in TensorFlow.js, in one process on the same WebGPU adapter, with ratios. TF.js is
// no dependency of the project: it is installed into a temporary folder on each run (npm registry needed), or loaded
// from TFJS_DIR when that names a folder where it already is (peer-install.ts). Peers: TF.js WebGPU (the same Dawn
// adapter) and TF.js WASM, single thread (the fastest TF.js engine on a CPU-only machine). Medians of interleaved
// rounds; ratios are ours / peer's tokens per second. TF.js waits for the GPU as the engine does on a CPU device
// (engine/dawn-poll.ts: the binding's polls on a 1 ms timer instead of a spin that takes a core from lavapipe), so the
// ratio compares the two engines' GPU work, not how they wait for it.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Engine } from '../../engine/index.ts';
import { peerFolder, shareDawnWithPeers } from './peer-install.ts';
import type { DecoderConfig } from '../../models/hf-config.ts';
import { BENCH_TINY } from '../../models/presets.ts';
import { seededRandom } from '../../engine/rng.ts';
import { benchmarkTrainStep } from './train.ts';
import { benchmarkRollout } from './rollout.ts';
import { median } from './harness.ts';
import { awaitDawn } from '../../engine/dawn-poll.ts';

const TFJS_PACKAGES = [
  '@tensorflow/tfjs@4.22.0',
  '@tensorflow/tfjs-backend-webgpu@4.22.0',
  '@tensorflow/tfjs-backend-wasm@4.22.0',
];
const B = 8;
const T = 128;
const PROMPT_LENGTH = 16;
const NEW_TOKENS = 112;

export interface PeerBenchRow {
  workload: string;
  ours_tokens_per_s: number;
  peer: string;
  peer_tokens_per_s: number;
  ratio: number;
}

// TF.js has no types here (it lives outside the project); the few calls below are checked by running them.
type Tf = any;
type TfTensor = any;

export async function loadTfjs(): Promise<Tf> {
  const dir = peerFolder('TFJS_DIR', TFJS_PACKAGES, '@tensorflow/tfjs');
  // The WebGPU backend registers itself only where navigator.gpu exists when it loads.
  await shareDawnWithPeers();
  const require = createRequire(join(dir, 'package.json'));
  // The union package, not tfjs-core alone: only its CommonJS bundle registers the gradients.
  const tf = require('@tensorflow/tfjs');
  // Both backends register themselves into this tfjs-core instance (the same node_modules).
  require('@tensorflow/tfjs-backend-webgpu');
  require('@tensorflow/tfjs-backend-wasm');
  return tf;
}

/** The tiny Llama in TF.js ops. Weights are stored [in, out], TF.js's fastest layout (transposing operands
 *  costs the WASM backend a repack per call); values are random, as in the engine's bench. */
class TfLlama {
  readonly vars: TfTensor[] = [];
  private readonly layers: Record<string, TfTensor>[] = [];
  private readonly embed: TfTensor;
  private readonly norm: TfTensor;
  private readonly head: TfTensor;
  private readonly ropeCos: TfTensor;
  private readonly ropeSin: TfTensor;
  private readonly rotateHalf: TfTensor;

  constructor(
    private readonly tf: Tf,
    private readonly c: DecoderConfig,
  ) {
    const random = seededRandom(1);
    const weight = (rows: number, cols: number) => {
      const data = new Float32Array(rows * cols);
      for (let i = 0; i < data.length; i++) data[i] = (random() - 0.5) * 0.04;
      return this.variable(tf.tensor2d(data, [rows, cols]));
    };
    const ones = (n: number) => this.variable(tf.ones([n]));
    const { hiddenSize: C, numHeads: NH, numKvHeads: KV, headDim: HS, intermediateSize: I, vocabSize: V } = c;
    this.embed = weight(V, C);
    for (let l = 0; l < c.numLayers; l++) {
      this.layers.push({
        inputNorm: ones(C),
        q: weight(C, NH * HS),
        k: weight(C, KV * HS),
        v: weight(C, KV * HS),
        o: weight(NH * HS, C),
        postNorm: ones(C),
        gate: weight(C, I),
        up: weight(C, I),
        down: weight(I, C),
      });
    }
    this.norm = ones(C);
    this.head = weight(C, V);
    const positions = 256;
    const angles = new Float32Array(positions * HS);
    for (let t = 0; t < positions; t++) {
      for (let i = 0; i < HS / 2; i++) {
        angles[t * HS + i] = angles[t * HS + i + HS / 2] = t * c.ropeTheta ** ((-2 * i) / HS);
      }
    }
    this.ropeCos = tf.cos(tf.tensor2d(angles, [positions, HS]));
    this.ropeSin = tf.sin(tf.tensor2d(angles, [positions, HS]));
    const rotate = new Float32Array(HS * HS);
    for (let j = 0; j < HS / 2; j++) {
      rotate[(j + HS / 2) * HS + j] = -1;
      rotate[j * HS + j + HS / 2] = 1;
    }
    this.rotateHalf = tf.tensor2d(rotate, [HS, HS]);
  }

  private variable(t: TfTensor): TfTensor {
    const v = this.tf.variable(t);
    this.vars.push(v);
    return v;
  }

  private rmsnorm(x: TfTensor, w: TfTensor): TfTensor {
    const tf = this.tf;
    return tf.mul(tf.mul(x, tf.rsqrt(tf.add(tf.mean(tf.square(x), -1, true), this.c.rmsNormEps))), w);
  }

  /** x [rows, in] · w [in, out]. */
  private linear(x: TfTensor, w: TfTensor): TfTensor {
    return this.tf.matMul(x, w);
  }

  /**
   * HF rotate-half RoPE on [Bn, heads, Tn, HS] with the cos and sin rows [Tn, HS] of its positions: x·cos + (x·R)·sin,
   * where the
   *  constant matrix R is rotate_half (a matmul is cheaper in TF.js than split, negate and concat). */
  private rope(x: TfTensor, cos: TfTensor, sin: TfTensor): TfTensor {
    const tf = this.tf;
    return tf.add(tf.mul(x, cos), tf.mul(tf.matMul(x, this.rotateHalf), sin));
  }

  /**
   * Logits [Bn·Tn, V] of tokens ids [Bn, Tn] at positions pos0…; with `cache`, keys and values of earlier
   * positions are read from it and this block's are appended (generation), else attention is over the block.
   */
  forward(ids: TfTensor, Bn: number, Tn: number, pos0 = 0, cache?: { k: TfTensor[]; v: TfTensor[] }): TfTensor {
    const tf = this.tf;
    const { numHeads: NH, numKvHeads: KV, headDim: HS } = this.c;
    const group = NH / KV;
    const total = pos0 + Tn;
    let mask: TfTensor | null = null;
    if (Tn > 1) {
      // Rows are (query head within the group, position): the causal pattern repeats per head.
      const m = new Float32Array(group * Tn * total);
      for (let r = 0; r < group * Tn; r++)
        for (let j = 0; j < total; j++) m[r * total + j] = j <= pos0 + (r % Tn) ? 0 : -1e9;
      mask = tf.tensor2d(m, [group * Tn, total]);
    }
    const cos = tf.slice(this.ropeCos, [pos0, 0], [Tn, HS]);
    const sin = tf.slice(this.ropeSin, [pos0, 0], [Tn, HS]);
    let x = tf.gather(this.embed, tf.reshape(ids, [Bn * Tn]));
    this.layers.forEach((w, l) => {
      const h = this.rmsnorm(x, w.inputNorm);
      const heads = (y: TfTensor, n: number) =>
        Tn === 1 ? tf.reshape(y, [Bn, n, 1, HS]) : tf.transpose(tf.reshape(y, [Bn, Tn, n, HS]), [0, 2, 1, 3]);
      const q = this.rope(heads(this.linear(h, w.q), NH), cos, sin);
      let k = this.rope(heads(this.linear(h, w.k), KV), cos, sin);
      let v = heads(this.linear(h, w.v), KV);
      if (cache) {
        if (pos0 > 0) {
          k = tf.concat([cache.k[l], k], 2);
          v = tf.concat([cache.v[l], v], 2);
          cache.k[l].dispose();
          cache.v[l].dispose();
        }
        cache.k[l] = tf.keep(k);
        cache.v[l] = tf.keep(v);
      }
      // Grouped-query attention without copying kv heads: the `group` query heads of one kv head are
      // consecutive, so [Bn, NH, Tn, HS] is [Bn, KV, group·Tn, HS] and each kv head is one batched matmul.
      const grouped = tf.reshape(q, [Bn, KV, group * Tn, HS]);
      let scores = tf.mul(tf.matMul(grouped, k, false, true), 1 / Math.sqrt(HS));
      if (mask) scores = tf.add(scores, mask);
      const attention = tf.reshape(tf.matMul(tf.softmax(scores), v), [Bn, NH, Tn, HS]);
      const merged = Tn === 1 ? attention : tf.transpose(attention, [0, 2, 1, 3]);
      x = tf.add(x, this.linear(tf.reshape(merged, [Bn * Tn, NH * HS]), w.o));
      const g = this.rmsnorm(x, w.postNorm);
      const gate = this.linear(g, w.gate);
      x = tf.add(x, this.linear(tf.mul(tf.mul(gate, tf.sigmoid(gate)), this.linear(g, w.up)), w.down));
    });
    return this.linear(this.rmsnorm(x, this.norm), this.head);
  }
}

/** One AdamW step (lr 1e-3, betas 0.9/0.95, weight decay 0.01, gradients clipped to norm 1), like the engine's. */
class TfAdamW {
  private readonly m: TfTensor[];
  private readonly v: TfTensor[];
  private step = 0;

  constructor(
    private readonly tf: Tf,
    private readonly vars: TfTensor[],
  ) {
    this.m = vars.map((p) => tf.variable(tf.zerosLike(p)));
    this.v = vars.map((p) => tf.variable(tf.zerosLike(p)));
  }

  apply(grads: TfTensor[]): void {
    const tf = this.tf;
    const [lr, b1, b2, eps, wd] = [1e-3, 0.9, 0.95, 1e-8, 0.01];
    this.step++;
    tf.tidy(() => {
      // A chain of adds, not addN: TF.js WebGPU's addN binds one buffer per input, past the device's limit.
      const norm = tf.sqrt(grads.map((g) => tf.sum(tf.square(g))).reduce((x, y) => tf.add(x, y)));
      const scale = tf.minimum(tf.div(1, tf.add(norm, 1e-6)), 1);
      this.vars.forEach((p, i) => {
        const g = tf.mul(grads[i], scale);
        this.m[i].assign(tf.add(tf.mul(this.m[i], b1), tf.mul(g, 1 - b1)));
        this.v[i].assign(tf.add(tf.mul(this.v[i], b2), tf.mul(tf.square(g), 1 - b2)));
        const mHat = tf.div(this.m[i], 1 - b1 ** this.step);
        const vHat = tf.div(this.v[i], 1 - b2 ** this.step);
        p.assign(tf.sub(tf.mul(p, 1 - lr * wd), tf.mul(tf.div(mHat, tf.add(tf.sqrt(vHat), eps)), lr)));
      });
    });
  }
}

/** Tokens/s of the TF.js training step: the same batch, masked mean cross-entropy over each row's second half. */
async function tfTrainStep(tf: Tf, c: DecoderConfig, steps: number, warmup: number, patient: boolean): Promise<number> {
  const model = new TfLlama(tf, c);
  const optimizer = new TfAdamW(tf, model.vars);
  const random = seededRandom(3);
  const weights = new Float32Array(B * T);
  for (let b = 0; b < B; b++) for (let t = T / 2 - 1; t < T - 1; t++) weights[b * T + t] = 1 / (B * (T / 2));
  const lossWeights = tf.tensor1d(weights);
  const times: number[] = [];
  for (let i = 0; i < warmup + steps; i++) {
    const ids = Array.from({ length: B * T }, () => 1 + Math.floor(random() * (c.vocabSize - 1)));
    const start = performance.now();
    const input = tf.tensor2d(ids, [B, T], 'int32');
    const targets = tf.oneHot(tf.tensor1d([...ids.slice(1), 0], 'int32'), c.vocabSize);
    const { value, grads } = tf.variableGrads(() => {
      const logProbs = tf.logSoftmax(model.forward(input, B, T));
      return tf.neg(tf.sum(tf.mul(tf.sum(tf.mul(logProbs, targets), -1), lossWeights)));
    }, model.vars);
    optimizer.apply(model.vars.map((v) => grads[v.name]));
    await awaitDawn(value.data(), patient);
    if (i >= warmup) times.push(performance.now() - start);
    tf.dispose([input, targets, value, ...Object.values(grads)]);
  }
  return (B * T) / (median(times) / 1000);
}

/** Generated tokens/s of TF.js: prefill the prompts, then one token per step against a growing KV cache. */
export async function tfGenerate(tf: Tf, c: DecoderConfig, runs: number, patient: boolean): Promise<number> {
  const model = new TfLlama(tf, c);
  const random = seededRandom(7);
  const prompts = Array.from({ length: B * PROMPT_LENGTH }, () => Math.floor(random() * c.vocabSize));
  const generate = async (newTokens: number) => {
    const cache = { k: [] as TfTensor[], v: [] as TfTensor[] };
    let next = tf.tidy(() =>
      tf.multinomial(
        model
          .forward(tf.tensor2d(prompts, [B, PROMPT_LENGTH], 'int32'), B, PROMPT_LENGTH, 0, cache)
          .reshape([B, PROMPT_LENGTH, c.vocabSize])
          .slice([0, PROMPT_LENGTH - 1, 0], [B, 1, c.vocabSize])
          .reshape([B, c.vocabSize]),
        1,
        1,
      ),
    );
    const tokens: TfTensor[] = [next];
    for (let s = 1; s < newTokens; s++) {
      const ids = next;
      next = tf.tidy(() => tf.multinomial(model.forward(ids, B, 1, PROMPT_LENGTH + s - 1, cache), 1, 1 + s));
      tokens.push(next);
    }
    await awaitDawn(next.data(), patient);
    tf.dispose([...tokens, ...cache.k, ...cache.v]);
  };
  await generate(8);
  const times: number[] = [];
  for (let r = 0; r < runs; r++) {
    const start = performance.now();
    await generate(NEW_TOKENS);
    times.push(performance.now() - start);
  }
  return (B * NEW_TOKENS) / (median(times) / 1000);
}

/** Rounds of every workload, ours and peers interleaved: on a shared machine the load drifts within minutes, so
 *  each ratio is of medians over rounds that saw the same drift. */
const ROUNDS = 5;

export async function benchmarkPeers(engine: Engine): Promise<PeerBenchRow[]> {
  const tf = await loadTfjs();
  const patient = engine.caps.softwareAdapter;
  const samples = new Map<string, number[]>();
  const record = (key: string, tokensPerSecond: number) =>
    samples.set(key, [...(samples.get(key) ?? []), tokensPerSecond]);
  const useBackend = async (backend: string) => {
    if (!(await tf.setBackend(backend))) throw new Error(`peers: TF.js backend ${backend} did not start`);
    await tf.ready();
  };
  for (let round = 0; round < ROUNDS; round++) {
    const [train] = await benchmarkTrainStep(engine, { configs: ['tiny'], microBatches: [1], steps: 3, warmup: 1 });
    record('train/ours', train.tokens_per_s);
    await useBackend('webgpu');
    record('train/TF.js webgpu', await tfTrainStep(tf, BENCH_TINY, 3, 1, patient));
    const [rollout] = await benchmarkRollout(engine, { configs: ['tiny'], modes: ['kv-cache'], runs: 1 });
    record('generation/ours', rollout.tokens_per_s);
    record('generation/TF.js webgpu', await tfGenerate(tf, BENCH_TINY, 1, patient));
    // TF.js WASM has no UnsortedSegmentSum, the gradient of the embedding gather: it cannot train this model.
    await useBackend('wasm');
    record('generation/TF.js wasm', await tfGenerate(tf, BENCH_TINY, 1, patient));
  }
  const rows: PeerBenchRow[] = [];
  for (const [key, values] of samples) {
    const [workload, peer] = key.split('/');
    if (peer === 'ours') continue;
    const ours = median(samples.get(`${workload}/ours`)!);
    const theirs = median(values);
    const name = workload === 'train' ? `train step tiny ${B}x${T}` : `generation tiny ${B}x${NEW_TOKENS}`;
    rows.push({ workload: name, ours_tokens_per_s: ours, peer, peer_tokens_per_s: theirs, ratio: ours / theirs });
  }
  return rows;
}
