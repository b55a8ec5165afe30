// GPU buffers for a block of m sequences of the rollout (S = prompt + response positions, R = response tokens):
// the token rows uploaded from the host rollout, the block's rows of the experience's per-token tensors gathered
// on the device (kernels/util/gather-rows: the experience never comes back to the host to be sliced), and the
// per-token tensors of the PPO losses. A block may keep only
// a window of the experience's columns (its own longest prompt and response: token-budget micro-batches), so
// its padding costs neither memory nor FLOPs. Every block shape views one set of buffers, grown to the largest
// block, so a training step allocates nothing on the GPU once the largest block has been seen.
import type { Engine, Tensor, DType } from '../../engine/index.ts';
import { tokenArrays, type TokenBatch } from '../../models/token-batch.ts';
import { GrowingBuffers } from '../../models/growing-buffers.ts';
import { gatherRows } from '../../kernels/util/gather-rows.ts';
import { actorLossExtras, actorLossExtrasSize, type ActorLossExtras } from '../../kernels/ppo/policy-loss.ts';

export interface ExperienceRows {
  inputIds: number[][];
  attentionMask: number[][];
  positionIds: number[][];
  /** Columns of prompt (left-padded) and of response (right-padded) in every row. */
  promptLength: number;
  responseLength: number;
}

/** On-policy distillation's (m, R) per-token tensors of a block (kernels/ppo/distillation-loss.ts) and, for
 *  forward_kl_topk, the teacher's top-k and the forward KL's outputs (kernels/ppo/forward-kl-topk.ts). */
export interface DistillationBuffers {
  /** The teachers' log-probs of the sampled tokens (sampled-token modes). */
  teacherLogProbs: Tensor;
  /** (m, 8) the distillation loss's partials. */
  partials: Tensor;
  /** d loss / d each token's distillation loss. */
  lossGrad: Tensor;
  topk: {
    K: number;
    /** (m, R, K) the teacher's top-k ids and log-probs. */
    ids: Tensor<'u32'>;
    logProbs: Tensor;
    /** [3, m·R]: the KL, student mass, teacher mass. */
    out: Tensor;
    coefs: Tensor;
    /** (m·S, K + 1) the LM head's sparse logits-gradient pairs. */
    pairIds: Tensor<'u32'>;
    pairCoefs: Tensor;
  } | null;
}

export class SequenceBuffers {
  batch: TokenBatch | undefined;
  /** The experience's response columns (the row stride of its (N, R) tensors), set by uploadSequences. */
  private sourceR = 0;
  /** (m) the block's row indices into the experience, set by uploadSequences. */
  private readonly rowIndex: Tensor<'u32'>;
  /** (m·S) the token batch's ids, positions and key mask. */
  private readonly ids: Tensor<'u32'>;
  private readonly positions: Tensor<'i32'>;
  private readonly keyMask: Tensor<'u32'>;
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
  /** (m, R) a 0/1 pick per token made on the host and uploaded: clip_cov / kl_cov's covariance selection, or the
   *  tokens bypass-mode rejection sampling keeps (never both: bypass mode runs vanilla or gpg). */
  readonly tokenFlags: Tensor;
  /** (m, R) rollout correction's importance weights on the policy loss: rollout_is's, gathered from the experience,
   *  or bypass-mode reinforce's, made on the host and uploaded. */
  readonly isWeights: Tensor;
  /** refLogProbs, entropy, tokenFlags and isWeights are its planes: the actor loss binds them as one. */
  readonly actorExtras: ActorLossExtras;
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
  /** On-policy distillation's buffers (a pool made with `distillation`); null otherwise, none allocated. */
  readonly distillation: DistillationBuffers | null;

  constructor(
    private readonly engine: Engine,
    buffers: GrowingBuffers,
    readonly rows: number,
    readonly S: number,
    readonly R: number,
    private readonly vocabSize: number,
    distillation: { topk: number | null } | null = null,
  ) {
    const e = {
      tensor: <D extends DType = 'f32'>(name: string, shape: number[], dtype?: D) => buffers.get(name, shape, dtype),
    };
    const tag = 'seq';
    this.ids = e.tensor(`${tag}.ids`, [rows * S], 'u32');
    this.positions = e.tensor(`${tag}.positions`, [rows * S], 'i32');
    this.keyMask = e.tensor(`${tag}.mask`, [rows * S], 'u32');
    this.rowIndex = e.tensor(`${tag}.rowIndex`, [rows], 'u32');
    const response = (name: string) => e.tensor(`${tag}.${name}`, [rows, R]);
    this.targets = e.tensor(`${tag}.targets`, [rows * S], 'u32');
    this.responseMask = response('responseMask');
    this.oldLogProbs = response('oldLogProbs');
    this.actorExtras = actorLossExtras(
      engine,
      e.tensor(`${tag}.actorExtras`, [actorLossExtrasSize(engine, rows, R)]),
      rows,
      R,
    );
    this.refLogProbs = this.actorExtras.refLogProb;
    this.advantages = response('advantages');
    this.returns = response('returns');
    this.oldValues = response('oldValues');
    this.logProbs = response('logProbs');
    this.entropy = this.actorExtras.entropy;
    this.vpreds = response('vpreds');
    this.gradVpreds = response('gradVpreds');
    this.tokenFlags = this.actorExtras.tokenFlags;
    this.isWeights = this.actorExtras.isWeights;
    this.actorGrads = e.tensor(`${tag}.actorGrads`, [rows, R, 2]);
    this.dLogprobs = e.tensor(`${tag}.dLogprobs`, [rows * S]);
    this.dEntropy = e.tensor(`${tag}.dEntropy`, [rows * S]);
    this.dValues = e.tensor(`${tag}.dValues`, [rows * S]);
    this.actorPartials = e.tensor(`${tag}.actorPartials`, [rows, 8]);
    this.actorOut = e.tensor(`${tag}.actorOut`, [8]);
    this.valuePartials = e.tensor(`${tag}.valuePartials`, [rows, 3]);
    this.valueOut = e.tensor(`${tag}.valueOut`, [3]);
    const K = distillation?.topk ?? null;
    this.distillation = distillation && {
      teacherLogProbs: response('teacherLogProbs'),
      partials: e.tensor(`${tag}.distillationPartials`, [rows, 8]),
      lossGrad: response('distillationLossGrad'),
      topk:
        K === null
          ? null
          : {
              K,
              ids: e.tensor(`${tag}.teacherTopIds`, [rows, R, K], 'u32'),
              logProbs: e.tensor(`${tag}.teacherTopLogProbs`, [rows, R, K]),
              out: e.tensor(`${tag}.topkOut`, [3, rows * R]),
              coefs: e.tensor(`${tag}.topkCoefs`, [rows, R, K]),
              pairIds: e.tensor(`${tag}.topkPairIds`, [rows * S, K + 1], 'u32'),
              pairCoefs: e.tensor(`${tag}.topkPairCoefs`, [rows * S, K + 1]),
            },
    };
  }

  /**
   * Uploads the token rows `indices` of the experience (and their next-token targets, and the indices themselves
   * for gatherResponse), keeping the window of S − R prompt columns (the last ones) and R response columns (the
   * first ones).
   */
  uploadSequences(rows: ExperienceRows, indices: readonly number[]): TokenBatch {
    if (indices.length !== this.rows) throw new Error(`sequence buffers of ${this.rows} rows given ${indices.length}`);
    const P = this.S - this.R;
    if (P > rows.promptLength || this.R > rows.responseLength) {
      throw new Error(
        `sequence buffers: a window of ${P} prompt + ${this.R} response columns exceeds the experience's ` +
          `${rows.promptLength} + ${rows.responseLength}`,
      );
    }
    const from = rows.promptLength - P;
    const pick = (all: number[][]) => indices.map((i) => all[i].slice(from, from + this.S));
    const host = tokenArrays(
      { inputIds: pick(rows.inputIds), attentionMask: pick(rows.attentionMask), positionIds: pick(rows.positionIds) },
      this.vocabSize,
    );
    const n = this.rows * this.S;
    this.batch = {
      B: this.rows,
      T: this.S,
      hostIds: host.ids,
      vocabSize: this.vocabSize,
      ids: this.ids,
      positions: this.positions,
      keyMask: this.keyMask,
    };
    this.engine.upload(this.batch.ids, host.ids);
    this.engine.upload(this.batch.positions, host.positions);
    this.engine.upload(this.batch.keyMask, host.mask);
    const targets = new Uint32Array(n);
    indices.forEach((row, b) => {
      const ids = rows.inputIds[row];
      for (let s = 0; s + 1 < this.S; s++) targets[b * this.S + s] = ids[from + s + 1];
    });
    this.engine.upload(this.targets, targets);
    indices.forEach((row) => {
      if (!(Number.isInteger(row) && row >= 0 && row < rows.inputIds.length))
        throw new Error(`sequence buffers: row ${row} is not one of the experience's ${rows.inputIds.length}`);
    });
    this.engine.upload(this.rowIndex, indices);
    this.sourceR = rows.responseLength;
    return this.batch;
  }

  /** Gathers the first R columns of the block's rows (those of the last uploadSequences) of an (N, R_experience)
   *  tensor of the experience into a response tensor, on the device. */
  gatherResponse(target: Tensor, all: Tensor): void {
    if (!this.sourceR) throw new Error('SequenceBuffers.gatherResponse: upload the sequences first');
    gatherRows(this.engine, {
      source: all,
      sourceStride: this.sourceR,
      rows: this.rowIndex,
      m: this.rows,
      width: this.R,
      out: target,
    });
  }
}

/** SequenceBuffers per block shape, all views of one set of buffers. */
export class SequenceBufferPool {
  private readonly pool = new Map<string, SequenceBuffers>();
  private readonly buffers: GrowingBuffers;
  private generation = 0;

  constructor(
    private readonly engine: Engine,
    private readonly vocabSize: number,
    /** Allocate on-policy distillation's buffers too (SequenceBuffers.distillation; topk: forward_kl_topk's K). */
    private readonly distillation: { topk: number | null } | null = null,
  ) {
    this.buffers = new GrowingBuffers(engine, 'ppo');
  }

  /** The block's buffers; the last block of the same shape's (its uploaded batch included) when they still hold. */
  get(rows: number, S: number, R: number): SequenceBuffers {
    const key = `${rows}x${S}x${R}`;
    let buffers = this.pool.get(key);
    if (!buffers || this.buffers.generation !== this.generation) {
      buffers = new SequenceBuffers(this.engine, this.buffers, rows, S, R, this.vocabSize, this.distillation);
      // A larger block reallocated the buffers: the views of every other shape are stale.
      if (this.buffers.generation !== this.generation) this.pool.clear();
      this.generation = this.buffers.generation;
      this.pool.set(key, buffers);
    }
    return buffers;
  }
}
