// The PPO-RLHF loop, one step top to bottom as verl's ray_trainer runs it: sample prompts → rollout (n samples each,
// old log-probs from the sampler) → reward → reward mask → reference log-probs → critic values → KL penalty in the
// reward → advantages (→ PF-PPO's resampling) → critic update → actor update → metrics (and verl's rollout dump);
// with on-policy distillation, frozen teachers score the rollout's tokens beside the reference;
// validation every trainer.test_freq steps. The reference is a frozen copy of the initial actor, allocated only when a
// KL term needs it (with LoRA: the actor's own base weights, adapters off, as verl's ref_in_actor); critic-free
// estimators allocate no critic at all; a frozen critic computes values and nothing else.
import type { Engine, Arena } from '../engine/index.ts';
import { peakFp32Flops } from '../engine/index.ts';
import { Rng, type RngState } from '../engine/rng.ts';
import type { DecoderConfig } from '../models/hf-config.ts';
import { CausalLm } from '../models/causal-lm.ts';
import { frozenParameterCopy } from '../models/parameter-store.ts';
import { isQuantized } from '../models/parameter-layout.ts';
import type { LoraAdapters } from '../models/lora-adapters.ts';
import { ValueModel } from '../models/value-model.ts';
import { uploadTokenBatch, destroyTokenBatch } from '../models/token-batch.ts';
import type { PpoConfig } from './config.ts';
import { computeDtype, frozenStorage, rolloutDtype, usesCritic, weightDtype } from './config.ts';
import { planStep, type StepPlan } from './step-plan.ts';
import { AdamWOptimizer, type AdamWState } from './training/adamw-optimizer.ts';
import { RolloutGenerator } from './phases/rollout.ts';
import type { RolloutBatch, RolloutConfig } from './generation/types.ts';
import { SearchSession, type SearchProtocol } from './environments/search/search-turns.ts';
import { ToolAgentSession, type ToolAgent } from './environments/tool-agent/tool-agent.ts';
import { ExperienceMaker, type ExperienceBatch } from './phases/experience.ts';
import { rolloutIsWeights, rolloutRejectionMask } from './algorithm/rollout-correction.ts';
import { ActorUpdater } from './phases/actor-update.ts';
import { CriticUpdater } from './phases/critic-update.ts';
import { getKlController, type KLController } from './algorithm/kl-controller.ts';
import { sampleRewardMask } from './algorithm/reward-mask.ts';
import { teacherFor } from './algorithm/distillation.ts';
import { learningRate } from './algorithm/lr-schedule.ts';
import { planCritic, criticMetrics, type CriticPlan } from './algorithm/critic-plan.ts';
import { stepMetrics, transferMetrics } from './metrics/step-metrics.ts';
import { varianceProxyMetrics } from './metrics/variance-proxy.ts';
import { overlongPenalty } from './rewards/overlong-penalty.ts';
import type { RewardScore } from './rewards/index.ts';
import { validationMetrics } from './metrics/validation-metrics.ts';
import { generationRecords, type GeneratedSample, type GenerationDumps } from './loggers/generation-records.ts';
import { checkAllFinite } from './training/finite-guard.ts';
import { dynamicSample, type ScoredBatch } from './algorithm/dynamic-sampling.ts';
import { pfPpoSample } from './algorithm/pf-ppo.ts';
import type { ServerRollout } from './generation/remote/remote-generation.ts';
import { localProbeLogProbs } from './generation/remote/local-probe.ts';
import {
  PrefetchedGeneration,
  type SavedPrefetchedBatch as SavedBatch,
} from './generation/remote/prefetched-generation.ts';

/** One prompt of the dataset, tokenized, with what its reward needs. */
export interface PromptRecord {
  promptIds: number[];
  dataSource: string;
  groundTruth: unknown;
  extraInfo: Record<string, unknown> | null;
}

/** A row's extra_info.tools_kwargs (verl's per-tool create_kwargs, e.g. the GSM8K tool's ground truth). */
function toolsKwargsOf(record: PromptRecord): Record<string, unknown> {
  const kwargs = record.extraInfo?.tools_kwargs;
  return kwargs !== null && typeof kwargs === 'object' && !Array.isArray(kwargs)
    ? (kwargs as Record<string, unknown>)
    : {};
}

/** A prompt's value of distillation.teacher_key: its data_source, or an extra_info field of that name. */
function routingValue(record: PromptRecord, key: string): unknown {
  return key === 'data_source' ? record.dataSource : record.extraInfo?.[key];
}

/** Where prompts come from and how responses are judged: the dataset, tokenizer and reward of the run. */
export interface TrainerIo {
  /**
   * The next batch of data.gen_batch_size prompts (data.train_batch_size when null); a checkpoint's cursor is past the
   * last one drawn.
   */
  nextTrainBatch(): PromptRecord[];
  validationSet(): PromptRecord[];
  /** Response text for the reward (special tokens dropped, but kept in search runs, as Search-R1). */
  decode(ids: readonly number[]): string | Promise<string>;
  score(record: PromptRecord, responseText: string): RewardScore | Promise<RewardScore>;
  eosTokenIds: readonly number[];
  padTokenId: number;
  /** do_search: rollouts are Search-R1 multi-turn searches with this protocol; null: single-turn. */
  search: SearchProtocol | null;
  /** multi_turn.enable: rollouts are verl's tool agent loop over these tools; null: off. */
  toolAgent?: ToolAgent | null;
}

export interface ModelWeights {
  config: DecoderConfig;
  params: Arena;
  /** LoRA adapters (actor_rollout_ref.model.lora_rank, critic.model.lora_rank): then only they train (a critic's
   *  with its `score` head, held in their arena), and `params` stays the base model. */
  lora?: LoraAdapters | null;
}

/** Everything besides the weights that a resumed run needs to continue exactly. */
export interface TrainerState {
  globalStep: number;
  rng: RngState;
  klCoef: number;
}

export interface TrainerSnapshot {
  state: TrainerState;
  actorOptimizer: AdamWState;
  criticOptimizer: AdamWState | null;
  /** mode=async: the batch the next step trains on, drawn (and generated) before `state` was taken; null: none. */
  prefetched: SavedPrefetchedBatch | null;
}

/** mode=async: the batch drawn for the next step, as a checkpoint holds it (ppo/generation/remote/). */
export type SavedPrefetchedBatch = SavedBatch<PromptRecord>;

export class PpoTrainer {
  // The run: its device, config, data and reward, and its length.
  private readonly engine: Engine;
  readonly config: PpoConfig;
  private readonly io: TrainerIo;
  readonly totalSteps: number;

  // The models: the actor (LoRA adapters on it, or none), the frozen reference and the critic (each null when no
  // term needs it), and the reward model (reward_model.enable: its scores replace the rule reward).
  readonly actor: CausalLm;
  /** The actor's LoRA adapters (the only weights its optimizer updates); null: the whole actor trains. */
  readonly actorLora: LoraAdapters | null;
  /** The critic's LoRA adapters and its `score` (critic.model.lora_rank > 0), saved as a PEFT adapter; else null. */
  readonly criticLora: LoraAdapters | null;
  private readonly reference: CausalLm | null;
  /** On-policy distillation's frozen teachers, in distillation plan order (none when off). */
  private readonly teachers: readonly CausalLm[];
  readonly critic: ValueModel | null;
  private readonly rewardModel: ValueModel | null = null;

  // The optimizers and the phases of a step.
  private readonly actorOptimizer: AdamWOptimizer;
  private readonly criticOptimizer: AdamWOptimizer | null;
  private readonly rollout: RolloutGenerator;
  private readonly experience: ExperienceMaker;
  private readonly actorUpdater: ActorUpdater;
  private readonly criticUpdater: CriticUpdater | null;

  // What the config decides once: the step's plan, the critic's role, sampling, the device's peak for perf/mfu.
  private readonly plan: StepPlan;
  /** Whether the critic computes values, and whether it trains (critic.freeze: values only). */
  private readonly criticPlan: CriticPlan;
  /** Sampling for training rollouts and for validation, without the seed each rollout draws. */
  private readonly sampling: { train: Omit<RolloutConfig, 'seed'>; validation: Omit<RolloutConfig, 'seed'> };
  /** The device's peak FP32 FLOP/s for perf/mfu (null: unknown, no MFU). */
  private readonly peakFlops: number | null;

  // The state a checkpoint saves (snapshot/restore): the step, the random stream, the KL coefficient, the optimizers'
  // moments above, and the batch drawn ahead for the next step (and the rollout servers that generate it).
  globalStep = 0;
  readonly rng: Rng;
  private readonly klCtrl: KLController;
  private readonly prefetch: PrefetchedGeneration<PromptRecord>;
  /**
   * True from a step's first update until the step completes: the weights are then neither the last step's nor the next
   * one's.
   */
  private updatingWeights = false;

  /** trainer.rollout_data_dir / validation_data_dir: where each step's and each validation's samples go (a Node
   *  writer the command line sets: ppo/loggers/generation-dump-node.ts); none by default. */
  generationDumps: GenerationDumps = { rollout: null, validation: null };

  constructor(
    engine: Engine,
    config: PpoConfig,
    actor: ModelWeights,
    critic: ModelWeights | null,
    io: TrainerIo,
    totalSteps: number,
    /** The reference weights when they are not the actor's current ones (a resumed run). */
    referenceParams: Arena | null = null,
    /** A neural reward model (reward_model.enable): scores replace the rule reward. */
    rewardModel: ModelWeights | null = null,
    /** distillation.enabled: the teachers' weights, one per distillation.teacher_models entry verl keeps, in order
     *  (ppo/algorithm/distillation.ts resolveTeachers), each sharing the actor's vocabulary. */
    teachers: readonly ModelWeights[] = [],
  ) {
    this.engine = engine;
    this.config = config;
    this.io = io;
    this.totalSteps = totalSteps;
    const c = config;
    const actorCfg = c.actor_rollout_ref.actor;
    const plan = planCritic({ advEstimator: c.algorithm.adv_estimator, freeze: c.critic.freeze });
    this.criticPlan = plan;
    if (usesCritic(c) && !critic) throw new Error('algorithm.adv_estimator=gae needs a critic model');
    this.rng = new Rng(c.trainer.seed);
    this.actor = new CausalLm(engine, actor.config, actor.params);
    const lora = actor.lora ?? null;
    this.actor.trunk.lora = lora;
    this.actorLora = lora;
    this.actorOptimizer = new AdamWOptimizer(
      engine,
      lora ? lora.params : actor.params,
      {
        lr: actorCfg.optim.lr,
        betas: actorCfg.optim.betas as [number, number],
        eps: 1e-8,
        weightDecay: actorCfg.optim.weight_decay,
        maxGradNorm: actorCfg.grad_clip,
        optimizer: actorCfg.optim.optimizer,
        offload: actorCfg.fsdp_config.optimizer_offload,
      },
      lora && ((grads) => lora.clearOffBlockGradients(grads)),
    );
    const needsReference = c.algorithm.use_kl_in_reward || actorCfg.use_kl_loss;
    // With LoRA the base weights never change: the reference reads them (no adapters on its trunk), no copy. Without
    // a KL term there is no reference at all (as verl's RefPolicy role), and no copy of the actor's weights either.
    // A quantized reference (ref.load_in_4bit / load_in_8bit) is quantized on the host, so it is made before (the
    // run's setup: storedParameterCopy) and handed in as referenceParams.
    const referenceWeights = () => {
      if (lora) return actor.params;
      if (referenceParams) return referenceParams;
      if (isQuantized(frozenStorage(c, 'reference', actor.config.torchDtype)))
        throw new Error(
          'actor_rollout_ref.ref.load_in_4bit / load_in_8bit: the quantized reference must be passed in ' +
            '(models/parameter-store.ts storedParameterCopy); the trainer copies only float and half references',
        );
      return frozenParameterCopy(
        engine,
        actor.config,
        actor.params,
        'reference',
        weightDtype(c, 'reference', actor.config.torchDtype),
      );
    };
    this.reference = needsReference ? new CausalLm(engine, actor.config, referenceWeights()) : null;
    this.critic = plan.computeValues && critic ? new ValueModel(engine, critic.config, critic.params) : null;
    const criticLora = critic?.lora ?? null;
    this.criticLora = criticLora;
    if (this.critic) this.critic.trunk.lora = criticLora;
    this.actor.trunk.gradientCheckpointing = config.actor_rollout_ref.model.enable_gradient_checkpointing;
    if (this.critic) this.critic.trunk.gradientCheckpointing = config.critic.model.enable_gradient_checkpointing;
    this.actor.trunk.setComputeDtype(computeDtype(c, 'actor'));
    if (this.critic) this.critic.trunk.setComputeDtype(computeDtype(c, 'critic'));
    this.criticOptimizer =
      plan.allocateOptimizerState && critic
        ? new AdamWOptimizer(
            engine,
            criticLora ? criticLora.params : critic.params,
            {
              lr: c.critic.optim.lr,
              betas: c.critic.optim.betas as [number, number],
              eps: 1e-8,
              weightDecay: c.critic.optim.weight_decay,
              maxGradNorm: c.critic.grad_clip,
              optimizer: c.critic.optim.optimizer,
              offload: c.critic.model.fsdp_config.optimizer_offload,
            },
            criticLora && ((grads) => criticLora.clearOffBlockGradients(grads)),
          )
        : null;
    this.rollout = new RolloutGenerator(engine, actor, rolloutDtype(c), this.actor.trunk.computeCopy);
    this.plan = planStep(c);
    const teacherCount = this.plan.distillation?.teachers.length ?? 0;
    if (teachers.length !== teacherCount)
      throw new Error(`distillation.teacher_models: ${teacherCount} teacher(s) configured, ${teachers.length} given`);
    for (const teacher of teachers)
      if (teacher.config.vocabSize !== actor.config.vocabSize)
        throw new Error(
          `distillation.teacher_models: a teacher's vocabulary of ${teacher.config.vocabSize} differs from the ` +
            `actor's ${actor.config.vocabSize}; teacher and student must share a tokenizer`,
        );
    this.teachers = teachers.map((t) => new CausalLm(engine, t.config, t.params));
    const teacherTopk = this.plan.distillation?.useTopk ? this.plan.distillation.loss.topk : null;
    this.experience = new ExperienceMaker(
      engine,
      this.reference,
      this.critic,
      actor.config.vocabSize,
      this.plan.experience.calculateSumPiSquared,
      this.teachers,
      teacherTopk,
    );
    this.actorUpdater = new ActorUpdater(
      engine,
      this.actor,
      this.actorOptimizer,
      this.plan.distillation && { topk: teacherTopk },
    );
    this.criticUpdater =
      this.critic && this.criticOptimizer ? new CriticUpdater(engine, this.critic, this.criticOptimizer) : null;
    this.klCtrl = getKlController(c.algorithm.kl_ctrl);
    this.peakFlops = peakFp32Flops(engine.caps, engine.knobs.peakFlops);
    this.sampling = { train: this.samplingConfig(false), validation: this.samplingConfig(true) };
    this.prefetch = new PrefetchedGeneration({
      draw: () => {
        const records = this.io.nextTrainBatch();
        return { records, seed: this.rng.nextUint32() };
      },
      rolloutConfig: (seed) => this.trainingRollout(seed),
      localLogProbs: (ids) => localProbeLogProbs(engine, this.actor, ids),
      vocabSize: actor.config.vocabSize,
    });
    if (rewardModel) {
      if (rewardModel.config.head !== 'sequence-classification') {
        throw new Error(
          `reward_model.model.path: expected a *ForSequenceClassification, got ${rewardModel.config.architecture}`,
        );
      }
      if (rewardModel.config.vocabSize !== actor.config.vocabSize) {
        throw new Error(
          `reward_model.model.path: vocabulary of ${rewardModel.config.vocabSize} differs from the actor's ` +
            `${actor.config.vocabSize}; the reward model must share the actor's tokenizer`,
        );
      }
      this.rewardModel = new ValueModel(engine, rewardModel.config, rewardModel.params);
    }
  }

  /**
   * Whether the weights and optimizer states are those of the last completed step (false only after a step that failed
   * mid-update).
   */
  get atStepBoundary(): boolean {
    return !this.updatingWeights;
  }

  /**
   * One PPO iteration (runStep, phase by phase). The math of each GPU phase reads best in its CPU reference, the plain
   * loops the kernels are tested against: the KL penalty in the reward in kernels/ppo/kl-penalty.ref.ts
   * (applyKlPenaltyRef), GAE in kernels/ppo/gae.ref.ts (computeGaeAdvantageReturnRef; the critic-free estimators in
   * kernels/ppo/advantage-outcome.ref.ts and reverse-returns.ref.ts), the critic's clipped value loss in
   * kernels/ppo/value-loss.ref.ts (computeValueLossRef) and the actor's clipped policy loss, entropy bonus and KL loss
   * in kernels/ppo/policy-loss.ref.ts (computeActorLossRef). A step that fails before its updates puts back its random
   * draws, KL coefficient and the batch prefetched for it, so a checkpoint saved then resumes exactly as if the step
   * had never started.
   */
  async step(): Promise<Record<string, number>> {
    const boundary = { rng: this.rng.state(), klCoef: this.klCtrl.value, prefetched: this.prefetch.mark() };
    try {
      return await this.runStep();
    } catch (err) {
      this.prefetch.rewind(this.updatingWeights ? null : boundary.prefetched);
      if (!this.updatingWeights) {
        this.rng.setState(boundary.rng);
        this.klCtrl.value = boundary.klCoef;
      }
      throw err;
    }
  }

  /** The iteration phase by phase; `timed` records timing_s/<phase>. */
  private async runStep(): Promise<Record<string, number>> {
    const plan = this.plan;
    const { timing, timed } = phaseTimer();
    const stepStart = performance.now();
    const transfersBefore = { ...this.engine.transfers };
    const { records, rollout, scores, rewardExtraInfo, envMetrics } = await this.trainBatch(timed);
    // verl writes this dump after the updates; here it comes before them, so a dump that fails leaves the step
    // undone and the last completed one saveable.
    const dumpRollout = this.generationDumps.rollout;
    if (dumpRollout) {
      const step = this.globalStep + 1;
      await timed('dump_rollout_generations', async () =>
        dumpRollout(
          step,
          generationRecords(step, await this.generatedSamples(records, rollout, scores, rewardExtraInfo)),
        ),
      );
    }
    const baselineScores = plan.remaxBaseline
      ? await timed('gen_max', () => this.remaxBaselines(records, rollout))
      : null;
    const mask = sampleRewardMask(this.rng, rollout.inputIds.length, plan.rewardMaskRatio);
    const batch = this.experience.begin(rollout, scores, mask);
    if (plan.experience.calculateLogProbs || plan.experience.calculateSumPiSquared)
      await timed('old_log_prob', () => this.experience.recomputeOldLogProbs(batch, plan.experience, this.actor));
    if (this.reference) await timed('ref', () => this.experience.referenceLogProbs(batch, plan.experience));
    if (plan.distillation) {
      const { teachers, teacherKey } = plan.distillation;
      const teacherOfRow = rollout.groupIds.map((g) =>
        teacherFor(teachers, teacherKey, routingValue(records[g], teacherKey)),
      );
      await timed('teacher', () => this.experience.teacherLogProbs(batch, plan.experience, teacherOfRow));
    }
    if (this.critic) await timed('values', () => this.experience.values(batch, plan.experience));
    await this.experience.klInReward(batch, plan.experience, this.klCtrl);
    // The importance weights take the mask before rejection, as verl computes both from the same batch.
    const rolloutMask = batch.responseMask;
    if (plan.rolloutRs) {
      const rs = rolloutRejectionMask(
        batch.oldLogProbs,
        batch.rolloutLogProbs!,
        batch.responseMask,
        batch.N,
        batch.R,
        plan.rolloutRs,
      );
      this.experience.rejectTokens(batch, rs.mask, rs.metrics);
    }
    const isWeights = this.rolloutIsWeights(batch, rolloutMask);
    let experience = await timed('adv', () =>
      this.experience.advantages(batch, plan.experience, baselineScores, isWeights, rewardExtraInfo),
    );
    if (plan.pfPpo) {
      // PF-PPO (GAE only): the updates and the data metrics see the batch resampled by sequence score, as verl's
      // compute_advantage returns it; the score is token_level_scores summed, the reward mask applied.
      const { indices, metrics } = pfPpoSample(
        scores.map((score, i) => score * mask.keep[i]),
        plan.pfPpo,
        this.rng,
      );
      experience = this.experience.resample(experience, indices);
      Object.assign(experience.metrics, metrics);
    }
    this.updatingWeights = true;
    let criticUpdate: Record<string, number> | null = null;
    if (this.criticUpdater) {
      const lr = learningRate(plan.criticOptim, this.globalStep, this.totalSteps);
      criticUpdate = await timed('update_critic', () =>
        this.criticUpdater!.update(experience, { ...plan.critic, lr }, this.rng),
      );
    }
    const updateMetrics = criticMetrics(this.criticPlan, criticUpdate);
    if (this.globalStep >= plan.criticWarmup) {
      const lr = learningRate(plan.actorOptim, this.globalStep, this.totalSteps);
      Object.assign(
        updateMetrics,
        await timed('update_actor', () => this.actorUpdater.update(experience, { ...plan.actor, lr }, this.rng)),
      );
    }
    // verl logs these whenever the batch holds Σπ², with the step's actor/grad_norm (none in critic warmup).
    const varianceProxy = experience.sumPiSquared
      ? varianceProxyMetrics(
          { ...experience, sumPiSquared: experience.sumPiSquared },
          updateMetrics['actor/grad_norm'] ?? null,
        )
      : {};
    this.globalStep++;
    this.updatingWeights = false;
    timing['timing_s/step'] = (performance.now() - stepStart) / 1000;
    return {
      ...stepMetrics({
        step: this.globalStep,
        experience,
        updateMetrics,
        timing,
        actorConfig: this.actor.config,
        criticConfig: this.critic?.config ?? null,
        peakFlops: this.peakFlops,
        maxPromptLength: this.config.data.max_prompt_length,
      }),
      ...envMetrics,
      ...varianceProxy,
      'perf/max_memory_allocated_gb': this.engine.peakAllocatedBytes / 2 ** 30,
      // What a long run must keep flat (tools/bench.js soak): device memory held now, and the engine's caches.
      'perf/memory_allocated_gb': this.engine.allocatedBytes / 2 ** 30,
      'perf/cached_pipelines': this.engine.cachedPipelines,
      'perf/cached_bind_groups': this.engine.cachedBindGroups,
      ...transferMetrics(transfersBefore, this.engine.transfers),
    };
  }

  /** One generation batch of prompts, rolled out and scored. */
  private async scoredBatch(
    timed: PhaseTimer['timed'],
  ): Promise<ScoredBatch<PromptRecord> & { envMetrics: Record<string, number> }> {
    const { records, rollout, envMetrics } = this.prefetch.servers
      ? await this.prefetch.fromServers(this.globalStep, this.prefetchesNext(), timed)
      : await this.inProcessBatch(timed);
    const { scores, rewardExtraInfo } = await timed('reward', () => this.reward(records, rollout));
    return { records, rollout, scores, rewardExtraInfo, envMetrics };
  }

  /** In-process generation; a resumed async checkpoint's batch (restore) is trained on as it was generated. */
  private async inProcessBatch(
    timed: PhaseTimer['timed'],
  ): Promise<{ records: PromptRecord[]; rollout: RolloutBatch; envMetrics: Record<string, number> }> {
    const batch = await this.prefetch.take(timed);
    if (batch.generated) return { records: batch.records, rollout: batch.generated.rollout, envMetrics: {} };
    return {
      records: batch.records,
      ...(await timed('gen', () => this.generate(batch.records, this.trainingRollout(batch.seed)))),
    };
  }

  private trainingRollout(seed: number): RolloutConfig {
    return { ...this.sampling.train, seed };
  }

  /** Gives the rollout the memory plan's budget (ppo/jobs/memory-plan.ts: gpu_memory_utilization of the device, less
   *  what the rest of the run needs) instead of gpu_memory_utilization of the device. */
  useRolloutBudget(bytes: number): void {
    this.sampling.train.memoryBudgetBytes = bytes;
    this.sampling.validation.memoryBudgetBytes = bytes;
  }

  /** Keeps the rollout's half copy of a frozen LoRA base between rollouts and validations, as the memory plan says
   *  (its keepsRolloutCopy: without free_cache_engine, or with it where memory allows); else it is freed with the
   *  decoders, as verl frees it. */
  keepFrozenRolloutCopy(): void {
    this.rollout.keepsFrozenCopy = true;
  }

  /** mode=async (verl's one-step-off-policy) with rollout servers: the next step's batch starts generating during
   *  this step's updates, except in the last step, since no step would train on it. */
  private prefetchesNext(): boolean {
    return this.config.actor_rollout_ref.rollout.mode === 'async' && this.globalStep + 1 < this.totalSteps;
  }

  useRolloutServers(servers: ServerRollout): void {
    if (this.io.search)
      throw new Error('actor_rollout_ref.rollout.server_urls: search (multi-turn) rollouts run in-process only');
    this.prefetch.servers = servers;
  }

  /** The step's batch: one generation batch, or with algorithm.filter_groups.enable DAPO's dynamic sampling over as
   *  many as it takes (env/* metrics then of the last one). */
  private async trainBatch(
    timed: PhaseTimer['timed'],
  ): Promise<ScoredBatch<PromptRecord> & { envMetrics: Record<string, number> }> {
    const filter = this.config.algorithm.filter_groups;
    if (!filter.enable) return this.scoredBatch(timed);
    let envMetrics: Record<string, number> = {};
    const { batch, numGenBatches } = await dynamicSample(
      {
        trainBatchSize: this.config.data.train_batch_size,
        maxNumGenBatches: filter.max_num_gen_batches,
        // checkCombinations refuses filter_groups.enable=true without a metric.
        metric: filter.metric!,
        padTokenId: this.io.padTokenId,
      },
      async () => {
        const scored = await this.scoredBatch(timed);
        envMetrics = scored.envMetrics;
        return scored;
      },
    );
    return { ...batch, envMetrics: { ...envMetrics, 'train/num_gen_batches': numGenBatches } };
  }

  /** algorithm.rollout_correction.rollout_is's truncated importance weights (N, R), null when off. As verl, they
   *  are computed before the advantages (the optimal token baselines read them) and travel with the experience to
   *  the actor's policy loss, which multiplies each token's term by its weight (geo_mean: each sequence's by their
   *  geometric mean); the critic and the advantages never see them. */
  private rolloutIsWeights(batch: ExperienceBatch, rolloutMask: Float32Array): Float32Array | null {
    const is = this.plan.rolloutIs;
    if (!is) return null;
    const { weights, metrics } = rolloutIsWeights(
      batch.oldLogProbs,
      batch.rolloutLogProbs!,
      rolloutMask,
      batch.N,
      batch.R,
      is.level,
      is.threshold,
      is.batchNormalize,
    );
    Object.assign(batch.metrics, metrics);
    return weights;
  }

  /** reward_model.enable: the reward model's score of each (prompt, response), in blocks of sequences. */
  private async rewardModelScores(rollout: RolloutBatch): Promise<number[]> {
    const block = this.config.reward_model.micro_batch_size_per_gpu ?? rollout.inputIds.length;
    const scores: number[] = [];
    for (let start = 0; start < rollout.inputIds.length; start += block) {
      const rows = {
        inputIds: rollout.inputIds.slice(start, start + block),
        attentionMask: rollout.attentionMask.slice(start, start + block),
        positionIds: rollout.positionIds.slice(start, start + block),
      };
      const batch = uploadTokenBatch(this.engine, rows, this.rewardModel!.config.vocabSize, 'reward');
      scores.push(...(await this.rewardModel!.sequenceScores(batch, rows.attentionMask)));
      destroyTokenBatch(this.engine, batch);
    }
    return scores;
  }

  private samplingConfig(validation: boolean): Omit<RolloutConfig, 'seed'> {
    const r = this.config.actor_rollout_ref.rollout;
    const sampling = validation ? r.val_kwargs : r;
    return {
      n: sampling.n,
      temperature: sampling.do_sample ? sampling.temperature : 0,
      topK: sampling.top_k,
      topP: sampling.top_p,
      // verl's rollout sends it with the training and the validation sampling alike.
      ignoreEos: r.ignore_eos,
      maxResponseLength: this.config.data.max_response_length,
      eosTokenIds: this.io.eosTokenIds,
      padTokenId: this.io.padTokenId,
      memoryBudgetBytes: r.gpu_memory_utilization * this.engine.memory.bytes,
    };
  }

  private rolloutConfig(validation: boolean): RolloutConfig {
    // Validation must not move the training stream: a resumed run would otherwise diverge after a validation.
    return validation
      ? {
          ...this.sampling.validation,
          seed: (this.config.trainer.seed ^ Math.imul(this.globalStep + 1, 0x9e3779b9)) >>> 0,
        }
      : { ...this.sampling.train, seed: this.rng.nextUint32() };
  }

  /** A rollout of the prompts; with do_search or multi_turn.enable, a multi-turn session and its metrics. */
  private async generate(
    records: readonly PromptRecord[],
    config: RolloutConfig,
  ): Promise<{ rollout: RolloutBatch; envMetrics: Record<string, number> }> {
    if (this.prefetch.servers)
      return {
        rollout: await this.prefetch.generate(
          this.globalStep,
          records.map((r) => r.promptIds),
          config,
        ),
        envMetrics: {},
      };
    if (!this.config.actor_rollout_ref.rollout.free_cache_engine) return this.generateInProcess(records, config);
    // verl's free_cache_engine (vLLM's sleep, wake_up): the forwards' and updates' activations are freed before the
    // rollout and the rollout's decoders and half copy of the actor after it, so the two never hold memory at once.
    for (const model of [this.actor, this.reference, this.critic, this.rewardModel, ...this.teachers])
      model?.trunk.releaseWork();
    return this.generateInProcess(records, config).finally(() => this.rollout.release());
  }

  private async generateInProcess(
    records: readonly PromptRecord[],
    config: RolloutConfig,
  ): Promise<{ rollout: RolloutBatch; envMetrics: Record<string, number> }> {
    const prompts = records.map((r) => r.promptIds);
    if (this.io.toolAgent) {
      const session = new ToolAgentSession(
        this.io.toolAgent,
        prompts.length * config.n,
        (i) => toolsKwargsOf(records[Math.floor(i / config.n)]),
        config.maxResponseLength,
      );
      const rollout = await this.rollout.generate(prompts, config, session);
      return { rollout, envMetrics: session.metrics() };
    }
    if (!this.io.search) return { rollout: await this.rollout.generate(prompts, config), envMetrics: {} };
    const session = await SearchSession.start(this.io.search, prompts.length * config.n);
    const decode = (ids: readonly number[]) => this.io.search!.tokenizer.decode(ids, { skipSpecialTokens: false });
    const rollout = await this.rollout.generate(prompts, { ...config, decode }, session);
    return { rollout, envMetrics: session.metrics(rollout.responseLengths.reduce((a, b) => a + b, 0)) };
  }

  /** Scores what the policy wrote: inserted observations are left out of the text the reward reads. `scores`
   *  include the overlong penalty; `rewardExtraInfo` is what each reward function returned beside its number. */
  private async scoreRollout(
    records: readonly PromptRecord[],
    rollout: RolloutBatch,
  ): Promise<{ scores: number[]; rewardExtraInfo: (Record<string, unknown> | null)[]; texts: string[] }> {
    const generated = rollout.responses.map((ids, i) => ids.filter((_, t) => rollout.responseMask[i][t] === 1));
    const texts: string[] = [];
    for (const ids of generated) texts.push(await this.io.decode(ids));
    // Every response is handed to the reward before any score is awaited: a custom reward's worker thread
    // receives the whole batch in one message.
    const rewards = await Promise.all(texts.map((text, i) => this.io.score(records[rollout.groupIds[i]], text)));
    return {
      scores: rewards.map((reward, i) => reward.score + overlongPenalty(generated[i].length, this.config)),
      rewardExtraInfo: rewards.map((reward) => reward.rewardExtraInfo),
      texts,
    };
  }

  /**
   * The reward of each response: the reward model's score when there is one, else the rule reward of its text (and what
   * it returned beside it).
   */
  private async reward(
    records: readonly PromptRecord[],
    rollout: RolloutBatch,
  ): Promise<{ scores: number[]; rewardExtraInfo: (Record<string, unknown> | null)[] }> {
    const { scores, rewardExtraInfo } = this.rewardModel
      ? { scores: await this.rewardModelScores(rollout), rewardExtraInfo: rollout.responses.map(() => null) }
      : await this.scoreRollout(records, rollout);
    checkAllFinite('reward', scores);
    return { scores, rewardExtraInfo };
  }

  /** The samples as verl's dumps show them: the prompt and the whole response (observations included) decoded as
   *  the reward reads text, the row's ground truth, the score. */
  private async generatedSamples(
    records: readonly PromptRecord[],
    rollout: RolloutBatch,
    scores: readonly number[],
    rewardExtraInfo: readonly (Record<string, unknown> | null)[],
  ): Promise<GeneratedSample[]> {
    return Promise.all(
      rollout.groupIds.map(async (g, i) => ({
        input: await this.io.decode(records[g].promptIds),
        output: await this.io.decode(rollout.responses[i].slice(0, rollout.responseLengths[i])),
        gts: records[g].groundTruth ?? null,
        score: scores[i],
        rewardExtraInfo: rewardExtraInfo[i],
      })),
    );
  }

  /** Greedy (val_kwargs) responses to the validation prompts: mean score, and a few samples to show; `onProgress`
   *  hears how far the generation has come. */
  async validate(
    onProgress?: RolloutConfig['onProgress'],
  ): Promise<{ metrics: Record<string, number>; samples: { prompt: number[]; response: string; score: number }[] }> {
    const started = performance.now();
    const records = this.io.validationSet();
    // The rollout's decoders, freed when it ends: a validation set larger than a batch grows them to decode more
    // sequences at once, and kept, those larger caches and logits would stay allocated through every later step (the
    // memory plan counts validation as a phase after the step's that no later phase carries).
    const { rollout, envMetrics } = await this.generate(records, { ...this.rolloutConfig(true), onProgress }).finally(
      () => this.rollout.release(),
    );
    const { scores, rewardExtraInfo, texts } = await this.scoreRollout(records, rollout);
    const seconds = (performance.now() - started) / 1000;
    // verl logs validation's turn counts as val-aux/num_turns/*; Search-R1's env/* go under val/.
    const metrics: Record<string, number> = Object.fromEntries(
      Object.entries(envMetrics).map(([k, v]) => [k.startsWith('num_turns/') ? `val-aux/${k}` : `val/${k}`, v]),
    );
    Object.assign(
      metrics,
      validationMetrics(
        scores.map((reward, i) => ({
          dataSource: records[rollout.groupIds[i]].dataSource,
          prompt: rollout.groupIds[i],
          reward,
          rewardExtraInfo: rewardExtraInfo[i],
        })),
      ),
    );
    metrics['val/test_score/mean'] = scores.reduce((a, b) => a + b, 0) / Math.max(1, scores.length);
    // verl's timer name for validation; a whole GSM8K test set is minutes of generation, worth watching.
    metrics['timing_s/testing'] = seconds;
    metrics['val/response_tokens_per_s'] = rollout.responseLengths.reduce((a, b) => a + b, 0) / seconds;
    // verl's validation dump leads the reward's extra fields with `reward`, the score again.
    if (this.generationDumps.validation) {
      await this.generationDumps.validation(
        this.globalStep,
        generationRecords(this.globalStep, await this.generatedSamples(records, rollout, scores, rewardExtraInfo), {
          reward: scores,
        }),
      );
    }
    const samples = texts
      .slice(0, Math.max(8, this.config.trainer.log_val_generations))
      .map((response, i) => ({ prompt: records[rollout.groupIds[i]].promptIds, response, score: scores[i] }));
    return { metrics, samples };
  }

  /** ReMax: the score of a greedy response to each prompt, repeated for every sample of that prompt. */
  private async remaxBaselines(records: readonly PromptRecord[], rollout: RolloutBatch): Promise<number[]> {
    const { rollout: greedy } = await this.generate(records, { ...this.rolloutConfig(false), n: 1, temperature: 0 });
    const { scores } = await this.scoreRollout(records, greedy);
    return rollout.groupIds.map((g) => scores[g]);
  }

  /**
   * The reference model's own weights (null when no KL term needs one, or with LoRA, where they are the actor's base).
   */
  get referenceParams(): Arena | null {
    return this.actorLora ? null : (this.reference?.params ?? null);
  }

  /** mode=async waits here for the batch generating for the next step, which the checkpoint holds as generated. */
  async snapshot(): Promise<TrainerSnapshot> {
    const prefetched = await this.prefetch.snapshot();
    return {
      state: { globalStep: this.globalStep, rng: this.rng.state(), klCoef: this.klCtrl.value },
      actorOptimizer: await this.actorOptimizer.saveState(),
      criticOptimizer: this.criticOptimizer ? await this.criticOptimizer.saveState() : null,
      prefetched,
    };
  }

  /** A checkpoint's prefetched batch is the next step's whatever rollout.mode and rollout.name now say: its prompts
   *  and seed are drawn (the restored random state and data cursor are past them), so training on it keeps every
   *  prompt once and the random stream the uninterrupted run's. */
  restore(snapshot: TrainerSnapshot): void {
    this.globalStep = snapshot.state.globalStep;
    this.rng.setState(snapshot.state.rng);
    this.klCtrl.value = snapshot.state.klCoef;
    this.actorOptimizer.loadState(snapshot.actorOptimizer);
    if (this.criticOptimizer) {
      if (!snapshot.criticOptimizer)
        throw new Error('resume: the checkpoint has no critic optimizer state but this run trains a critic');
      this.criticOptimizer.loadState(snapshot.criticOptimizer);
    }
    this.prefetch.restore(snapshot.prefetched);
  }
}

/** Wall time of each phase of a step, as verl's timing_s/<phase> metrics. */
interface PhaseTimer {
  timing: Record<string, number>;
  timed: <T>(name: string, work: () => Promise<T>) => Promise<T>;
}

/** A phase run more than once in a step (gen and reward under dynamic sampling) adds up, as verl's marked_timer. */
function phaseTimer(): PhaseTimer {
  const timing: Record<string, number> = {};
  const timed = async <T>(name: string, work: () => Promise<T>): Promise<T> => {
    const start = performance.now();
    const result = await work();
    timing[`timing_s/${name}`] = (timing[`timing_s/${name}`] ?? 0) + (performance.now() - start) / 1000;
    return result;
  };
  return { timing, timed };
}
