// GPU buffers for a block of m sequences of the rollout (S = prompt + response positions, R = response tokens):
// inputs uploaded from the host experience, and the per-token tensors of the PPO losses. One set per block size,
// reused every step, so a training step allocates nothing on the GPU.
import type { Engine, Tensor } from '../../engine/index.ts';
import { uploadTokenBatch, type TokenBatch } from '../../models/token-batch.ts';

export interface ExperienceRows {
  inputIds: number[][];
  attentionMask: number[][];
  positionIds: number[][];
}

export class SequenceBuffers {
  batch: TokenBatch | undefined;
  /** (m·S) next-token ids: targets[s] = ids[s + 1]. */
  readonly targets: Tensor<'u32'>;
  /** (m, R) response-token tensors. */
  readonly responseMask: Tensor;
  readonly oldLogProbs: Tensor;
  readonly refLogProbs: Tensor;
  readonly advantages: Tensor;
  readonly returns: Tensor;
  readonly oldValues: Tensor;
  readonly logProbs: Tensor;
  readonly entropy: Tensor;
  readonly vpreds: Tensor;
  readonly gradVpreds: Tensor;
  /** (m, R, 2) d loss/d (log-prob, entropy). */
  readonly actorGrads: Tensor;
  /** (m·S) the same moved to the sequence positions that predict each token. */
  readonly dLogprobs: Tensor;
  readonly dEntropy: Tensor;
  readonly dValues: Tensor;
  readonly actorPartials: Tensor;
  readonly actorOut: Tensor;
  readonly valuePartials: Tensor;
  readonly valueOut: Tensor;

  constructor(private readonly engine: Engine, readonly rows: number, readonly S: number, readonly R: number, private readonly vocabSize: number) {
    const e = engine;
    const tag = `seq${rows}x${S}`;
    const response = (name: string) => e.tensor(`${tag}.${name}`, [rows, R]);
    this.targets = e.tensor(`${tag}.targets`, [rows * S], 'u32');
    this.responseMask = response('responseMask');
    this.oldLogProbs = response('oldLogProbs');
    this.refLogProbs = response('refLogProbs');
    this.advantages = response('advantages');
    this.returns = response('returns');
    this.oldValues = response('oldValues');
    this.logProbs = response('logProbs');
    this.entropy = response('entropy');
    this.vpreds = response('vpreds');
    this.gradVpreds = response('gradVpreds');
    this.actorGrads = e.tensor(`${tag}.actorGrads`, [rows, R, 2]);
    this.dLogprobs = e.tensor(`${tag}.dLogprobs`, [rows * S]);
    this.dEntropy = e.tensor(`${tag}.dEntropy`, [rows * S]);
    this.dValues = e.tensor(`${tag}.dValues`, [rows * S]);
    this.actorPartials = e.tensor(`${tag}.actorPartials`, [rows, 8]);
    this.actorOut = e.tensor(`${tag}.actorOut`, [8]);
    this.valuePartials = e.tensor(`${tag}.valuePartials`, [rows, 3]);
    this.valueOut = e.tensor(`${tag}.valueOut`, [3]);
  }

  /** Uploads the token rows `indices` of the experience (and their next-token targets). */
  uploadSequences(rows: ExperienceRows, indices: readonly number[]): TokenBatch {
    if (indices.length !== this.rows) throw new Error(`sequence buffers of ${this.rows} rows given ${indices.length}`);
    const pick = <T>(all: T[]) => indices.map((i) => all[i]);
    this.batch = uploadTokenBatch(this.engine, {
      inputIds: pick(rows.inputIds), attentionMask: pick(rows.attentionMask), positionIds: pick(rows.positionIds),
    }, this.vocabSize, 'ppo', this.batch);
    const targets = new Uint32Array(this.rows * this.S);
    indices.forEach((row, b) => {
      const ids = rows.inputIds[row];
      for (let s = 0; s + 1 < this.S; s++) targets[b * this.S + s] = ids[s + 1];
    });
    this.engine.upload(this.targets, targets);
    return this.batch;
  }

  /** Uploads rows `indices` of a host (N, R) array into one of the response tensors. */
  uploadResponse(target: Tensor, all: Float32Array, indices: readonly number[]): void {
    const R = this.R;
    const data = new Float32Array(this.rows * R);
    indices.forEach((row, b) => data.set(all.subarray(row * R, (row + 1) * R), b * R));
    this.engine.upload(target, data);
  }
}

/** One SequenceBuffers per block size. */
export class SequenceBufferPool {
  private readonly pool = new Map<string, SequenceBuffers>();

  constructor(private readonly engine: Engine, private readonly vocabSize: number) {}

  get(rows: number, S: number, R: number): SequenceBuffers {
    const key = `${rows}x${S}x${R}`;
    let buffers = this.pool.get(key);
    if (!buffers) {
      buffers = new SequenceBuffers(this.engine, rows, S, R, this.vocabSize);
      this.pool.set(key, buffers);
    }
    return buffers;
  }
}

/** Splits [0, n) into consecutive blocks of `size` (the last may be shorter). */
export function blocks(indices: readonly number[], size: number): number[][] {
  const out: number[][] = [];
  for (let i = 0; i < indices.length; i += size) out.push(indices.slice(i, i + size));
  return out;
}
