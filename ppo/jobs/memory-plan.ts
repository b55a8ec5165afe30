// The run's memory plan, computed from the configuration and the models' shapes before anything is allocated:
// what stays resident (parameters, gradients, AdamW moments of each model) and what each phase adds on top
// (rollout: KV caches, prefill activations, sampling logits; log-prob and value forwards; actor and critic updates:
// activations of one micro-batch), the peak, and what cannot work — a single tensor above the device's binding
// limit that no kernel splits, or a peak above the memory budget — each with the keys that would make it fit.
// Estimates follow the tensors models/ allocates (float32, except frozen weights — the reference, reward model,
// frozen critic, the actor's LoRA base — whose matrices are stored in bf16/f16 by their fsdp_config.model_dtype or
// their checkpoint's torch_dtype, and with rollout.dtype=bfloat16|float16 the rollout's copy of the actor and its
// KV caches); small per-sequence buffers are left out. Phases are not disjoint: what a phase
// allocates stays allocated after it (the rollout keeps its decoders, each model its work buffers, the engine its
// LM-head scratch: models/growing-buffers.ts, kernels/util/scratch.ts only grow), so each phase's peak counts what
// earlier phases left, and a buffer a later phase reuses once, at its larger size.
// Browser-safe.
import type { DecoderConfig } from '../../models/hf-config.ts';
import {
  headEntries,
  isLayerMatrix,
  isQuantized,
  parameterEntries,
  qkvWidth,
  type WeightStorage,
} from '../../models/parameter-layout.ts';
import {
  bytesPerElement,
  chooseVariant,
  elementCount,
  type DeviceMemorySize,
  type Engine,
  type ArenaEntry,
} from '../../engine/index.ts';
import { transposedWeightVariants } from '../../kernels/util/transpose.ts';
import { lmHeadDefaultChunkWidth } from '../../kernels/layers/lm-head.ts';
import {
  batchSizes,
  usesCritic,
  actorLoraSettings,
  criticLoraSettings,
  actorBaseStorage,
  rolloutDtype,
  computeDtype,
  weightDtype,
  frozenStorage,
  type PpoConfig,
} from '../config.ts';
import { loraArenaElements, loraEntries, type LoraSettings } from '../../models/lora.ts';
import { momentBytes, offloadStagingBytes, type OptimizerName } from '../training/adamw-optimizer.ts';
import { rolloutMemory, rolloutSlots } from '../generation/slots.ts';
import { continuousCacheCapacity } from '../generation/continuous-batching.ts';
import { DEFAULT_READ_EVERY } from '../generation/types.ts';
import { decodeTransposedWeightNames } from '../../models/incremental-decoder.ts';
import { rowChunks } from '../../models/row-chunks.ts';
import { attentionWindowRows } from '../../models/attention-windows.ts';

const F32 = 4;
const HALF = 2;
/** WebGPU's default minStorageBufferOffsetAlignment, where the device's is not given. */
const DEFAULT_BINDING_ALIGNMENT = 256;

export interface DeviceMemory {
  /** Largest storage binding (maxStorageBufferBindingSize). */
  maxBindingBytes: number;
  /** minStorageBufferOffsetAlignment (256 when not given): where binding windows of a weight may start. */
  bindingAlignBytes?: number;
  /** The device's memory (engine/device-memory.ts): the peak must fit it, and the rollout may take
   *  rollout.gpu_memory_utilization of it. */
  memory: DeviceMemorySize;
  /** Training forwards multiply by transposed copies of the layer weights (kernels/util/transpose.ts: CPU devices). */
  transposedWeights?: boolean;
  /** Decode steps multiply by transposed copies of the actor's weights, kept by the rollout (CPU devices). */
  decodeTransposedWeights?: boolean;
}

export interface PlanModels {
  actor: DecoderConfig;
  /** The critic's config when the run uses one. */
  critic: DecoderConfig | null;
  rewardModel: DecoderConfig | null;
  /** The actor's LoRA adapters as loaded (a lora_adapter_path's own settings); undefined: from the config's keys. */
  actorLora?: LoraSettings | null;
}

export interface MemoryItem {
  what: string;
  bytes: number;
  /** A phase's buffers: which they are (a model's work buffers, the rollout's decoders, the engine's LM-head scratch
   *  of this size). They stay allocated after the phase; a later item with the same key reuses them, grown to the
   *  larger of the two. */
  key?: string;
}

export interface PhasePlan {
  phase: string;
  /** What the phase allocates beyond the resident tensors. */
  items: MemoryItem[];
  bytes: number;
  /** What earlier phases left allocated on top of this phase's items (their buffers, or the part of a reused
   *  buffer an earlier phase grew larger). */
  keptBytes: number;
  /** Resident + kept + this phase. */
  peakBytes: number;
  /** Its largest single tensor that kernels bind whole. */
  largestTensor: MemoryItem;
}

export interface MemoryPlan {
  resident: MemoryItem[];
  residentBytes: number;
  /** What lives in host memory instead (fsdp_config.optimizer_offload: the moments); not part of the peak. */
  host: MemoryItem[];
  phases: PhasePlan[];
  peakBytes: number;
  budgetBytes: number;
  /** What the budget is: the device's memory, of which GPU or system RAM, and where the size came from. */
  budgetLabel: string;
  /** The rollout's share of it: rollout.gpu_memory_utilization × budgetBytes, less what would push the run's peak
   *  past the budget (the trainer gives its rollout this). */
  rolloutBudgetBytes: number;
  /** The rollout's budget is less than gpu_memory_utilization of the device, so that the run's peak fits. */
  rolloutBudgetShrunk: boolean;
  /** The rollout keeps its half copy of a frozen LoRA base between rollouts and validations (resident here): the copy
   *  never changes. Always without free_cache_engine; with it where the peak still fits the device and the
   *  rollout's budget does not shrink for it. */
  keepsRolloutCopy: boolean;
  /** What does not fit, each naming the keys that would make it fit; empty when everything does. */
  problems: string[];
}

/** Elements of a model's parameters, or of those `keep` accepts. */
export function parameterCount(
  c: DecoderConfig,
  keep: (name: string, shape: readonly number[]) => boolean = () => true,
): number {
  return parameterEntries(c)
    .filter((e) => keep(e.name, e.shape))
    .reduce((n, e) => n + elementCount(e.shape), 0);
}

/** Bytes of a model's parameters with its matrices stored as `storage` (a frozen model's), as its arena allocates
 *  them: each tensor starts at a multiple of `alignBytes` (engine/arena.ts), which pads the scales of
 *  double-quantized NF4 (1,288 B for a 128 × 128 projection, 1,536 B allocated). */
export function parameterBytes(
  c: DecoderConfig,
  storage: WeightStorage = 'f32',
  alignBytes = DEFAULT_BINDING_ALIGNMENT,
): number {
  return parameterEntries(c, storage).reduce(
    (n, e) => n + Math.ceil((elementCount(e.shape) * bytesPerElement(e.dtype ?? 'f32')) / alignBytes) * alignBytes,
    0,
  );
}

/** " (bf16 matrices)" for a half dtype, the split for a quantized base, else nothing. */
function dtypeNote(storage: WeightStorage, c: DecoderConfig): string {
  if (isQuantized(storage)) return ` (${storage} layer matrices, ${parameterEntries(c, storage)[0].dtype} embedding)`;
  return storage === 'f32' ? '' : ` (${storage} matrices)`;
}

/** Float32 elements per token of a decoder trunk's activations; `loraRank`: the actor's adapters (r), whose
 *  low-rank activations are 3r (q, k, v) + r (o) + 2r (gate, up) + r (down) a layer, and whose backward keeps the
 *  widest (3r). `attention`: the widest row attention binds over every token of a micro-batch at once (the fused
 *  qkv and its gradient, its output and that gradient); every other op runs over windows of rows where a tensor it
 *  binds by rows is above one binding (models/row-chunks.ts): the MLP over windows of `mlpWidths`, the rest of the
 *  trunk and the heads over windows of `rowWidths` (the decoder's lists). */
function activationsPerToken(
  c: DecoderConfig,
  training: boolean,
  loraRank: number,
): { perLayer: number; fixed: number; attention: number; rowWidths: number[]; mlpWidths: number[] } {
  const C = c.hiddenSize;
  const W = qkvWidth(c);
  const I = c.intermediateSize;
  const heads = c.numHeads * c.headDim;
  const qkv = c.qkNorm ? 2 * W + c.numHeads + c.numKvHeads : W;
  const perLayer = 4 * C + 2 + qkv + heads + c.numHeads + 3 * I + 7 * loraRank;
  const backward = 2 * C + 3 * I + heads + (c.qkNorm ? 2 * W : W) + 1 + 3 * loraRank;
  return {
    perLayer,
    fixed: 2 * C + 1 + (training ? backward : 0),
    attention: Math.max(W, heads),
    rowWidths: [
      C,
      W,
      heads,
      1,
      ...(c.qkNorm ? [c.numHeads + c.numKvHeads] : []),
      ...(loraRank > 0 ? [3 * loraRank, loraRank] : []),
    ],
    mlpWidths: [C, 2 * I, I, ...(loraRank > 0 ? [2 * loraRank, loraRank, 3 * loraRank] : [])],
  };
}

/** Trunk activations of `tokens` tokens (models/decoder.ts's workspaces): every layer's when training; with
 *  gradient checkpointing every layer's input and one layer's set, recomputed layer by layer in the backward;
 *  otherwise two layers' sets, each layer reading the other's output. `halfCompute` (mixed precision): a half (R, C)
 *  scratch that rounds the residual stream, and checkpointed inputs kept in half precision, unpacked into one shared
 *  float32 input, with one float32 output before rounding. */
function trunkActivations(
  c: DecoderConfig,
  tokens: number,
  training: boolean,
  checkpointed = false,
  loraRank = 0,
  halfCompute = false,
): { bytes: number; attentionRow: number; rowWidths: number[]; mlpWidths: number[] } {
  const { perLayer, fixed, attention, rowWidths, mlpWidths } = activationsPerToken(c, training, loraRank);
  const C = c.hiddenSize;
  const layers = !training
    ? 2 * perLayer
    : checkpointed
      ? perLayer + (halfCompute ? C : (c.numLayers - 1) * C)
      : perLayer * c.numLayers;
  const halves = !halfCompute ? 0 : training && checkpointed ? (c.numLayers + 1) * C : C;
  const bytes = tokens * ((layers + fixed) * F32 + halves * HALF);
  return { bytes, attentionRow: attention * F32, rowWidths, mlpWidths };
}

/** Float32 elements of a trunk's layer weight matrices (the projections a training forward may transpose). */
function layerWeightElements(c: DecoderConfig): number {
  return parameterCount(c, (name, shape) => name.startsWith('model.layers.') && shape.length === 2);
}

/** Whether every float32 layer matrix of `c` binds whole: only then are they transposed (models/transposed-weights.ts
 *  bindsWhole; a larger one is multiplied in windows of its rows, as stored). */
function transposesLayerMatrices(c: DecoderConfig, maxBindingBytes: number): boolean {
  return parameterEntries(c, 'f32').every(
    (e) => !isLayerMatrix(e.name) || elementCount(e.shape) * F32 <= maxBindingBytes,
  );
}

/** A prompt set as the run loaded it: how many prompts, and the longest one's tokens. */
export interface PromptSet {
  count: number;
  longest: number;
}

/** The run's prompts where they are known (train.js knows both sets; the bench plans a model alone): each rollout
 *  sizes its decoders by its batch's longest prompt (ppo/generation/sample-records.ts promptBatch), so the set's
 *  longest bounds them more tightly than data.max_prompt_length. No validation set: no validation phase. */
export interface PlanPrompts {
  training?: PromptSet;
  validation?: PromptSet;
}

/** The PromptSet of loaded prompts (undefined for none). */
export function promptSetOf(examples: readonly { promptIds: readonly number[] }[]): PromptSet | undefined {
  if (examples.length === 0) return undefined;
  return { count: examples.length, longest: Math.max(...examples.map((e) => e.promptIds.length)) };
}

/**
 * The memory plan of `config` with these models on this device. The rollout takes up to gpu_memory_utilization of
 * the device, but no more than the rest of the run leaves: its decoders stay allocated through the forwards and
 * updates, so a rollout that filled its share on top of a large resident model would push the run's peak past the
 * device (one storage binding used to keep the rollout small; decode groups lift that). Where the peak is over, the
 * rollout's budget shrinks by the excess, as long as that lowers the peak and leaves room for one sequence.
 */
export function planMemory(
  config: PpoConfig,
  models: PlanModels,
  device: DeviceMemory,
  prompts: PlanPrompts = {},
): MemoryPlan {
  const { frozenRolloutCopy, ...freeing } = planFittingBudget(config, models, device, prompts, false);
  if (!frozenRolloutCopy) return freeing;
  // The rollout's half copy of a frozen LoRA base would be remade, unchanged, at every rollout: kept instead where
  // memory allows — the run's peak still fits the device and the rollout's budget does not shrink for it (the
  // rollout's phase holds the copy either way; keeping it adds to the phases between rollouts).
  const { frozenRolloutCopy: _, ...keeping } = planFittingBudget(config, models, device, prompts, true);
  return keeping.peakBytes <= keeping.budgetBytes && keeping.rolloutBudgetBytes >= freeing.rolloutBudgetBytes
    ? keeping
    : freeing;
}

function planFittingBudget(
  config: PpoConfig,
  models: PlanModels,
  device: DeviceMemory,
  prompts: PlanPrompts,
  keepCopy: boolean,
): MemoryPlan & { frozenRolloutCopy: boolean } {
  let plan = planWithRolloutBudget(config, models, device, prompts, null, keepCopy);
  for (let tries = 0; tries < 8 && plan.peakBytes > plan.budgetBytes; tries++) {
    // What the rollout's decoders take (at most its budget), less the excess.
    const rollout = plan.phases.find((p) => p.phase.startsWith('rollout ('));
    // The decoders' items (the slot count's budget), not the half copy of the actor.
    const used = (rollout?.items ?? [])
      .filter((i) => i.key?.startsWith('rollout ') && i.key !== 'rollout copy')
      .reduce((n, i) => n + i.bytes, 0);
    const budget = Math.min(plan.rolloutBudgetBytes, used) - (plan.peakBytes - plan.budgetBytes);
    if (budget <= 0) break;
    const smaller = planWithRolloutBudget(config, models, device, prompts, budget, keepCopy);
    if (smaller.peakBytes >= plan.peakBytes || smaller.problems.some((p) => p.startsWith('rollout: '))) break;
    plan = { ...smaller, rolloutBudgetShrunk: true };
  }
  return plan;
}

function planWithRolloutBudget(
  config: PpoConfig,
  models: PlanModels,
  device: DeviceMemory,
  prompts: PlanPrompts,
  /** The rollout's budget; null: gpu_memory_utilization of the device. */
  rolloutBudget: number | null,
  /** Keep the rollout's half copy of a frozen LoRA base resident under free_cache_engine. */
  keepCopy: boolean,
): MemoryPlan & { frozenRolloutCopy: boolean } {
  const { actor, rewardModel } = models;
  const critic = usesCritic(config) ? models.critic : null;
  const sizes = batchSizes(config);
  // The forwards and updates run on the batch's longest prompt plus max_response_length tokens.
  const longestTrainingPrompt = Math.min(config.data.max_prompt_length, prompts.training?.longest ?? Infinity);
  const sequenceLength = longestTrainingPrompt + config.data.max_response_length;
  const problems: string[] = [];
  const rolloutBudgetBytes =
    rolloutBudget ?? config.actor_rollout_ref.rollout.gpu_memory_utilization * device.memory.bytes;

  const alignBytes = device.bindingAlignBytes ?? DEFAULT_BINDING_ALIGNMENT;
  const storedBytes = (c: DecoderConfig, storage: WeightStorage) => parameterBytes(c, storage, alignBytes);
  const resident: MemoryItem[] = [];
  // LoRA: the frozen base in its stored dtype, gradients and moments of the adapters only, and the reference reads
  // the actor's base.
  const lora = models.actorLora !== undefined ? models.actorLora : actorLoraSettings(config);
  const actorStorage = lora ? actorBaseStorage(config, actor.torchDtype) : 'f32';
  const actorParams = storedBytes(actor, actorStorage);
  resident.push({ what: `actor parameters${dtypeNote(actorStorage, actor)}`, bytes: actorParams });
  const trainedBytes = lora ? loraArenaElements(actor, lora) * F32 : actorParams;
  if (lora) resident.push({ what: `actor LoRA adapters (r=${lora.rank})`, bytes: trainedBytes });
  resident.push({ what: lora ? 'actor adapter gradients' : 'actor gradients', bytes: trainedBytes });
  const host: MemoryItem[] = [];
  /** A trained model's AdamW moments: resident, or with optimizer_offload in host memory, the device holding the
   *  staging buffer each update streams them through (ppo/training/offloaded-moments.ts). */
  const moments = (who: string, entries: readonly ArenaEntry[], optimizer: OptimizerName, offload: boolean) => {
    const item = { what: `${who} ${optimizer} moments`, bytes: momentBytes(entries, optimizer) };
    if (!offload) {
      resident.push(item);
      return;
    }
    host.push(item);
    resident.push({
      what: `${who} ${optimizer} offload staging`,
      bytes: offloadStagingBytes(entries, optimizer, device.maxBindingBytes),
    });
  };
  moments(
    lora ? 'actor adapter' : 'actor',
    lora ? loraEntries(actor, lora) : parameterEntries(actor),
    config.actor_rollout_ref.actor.optim.optimizer,
    config.actor_rollout_ref.actor.fsdp_config.optimizer_offload,
  );
  // Transposed copies (CPU devices) stay allocated from their first use on: one set per arena, shared by the
  // actor's training forwards and its decode steps (models/transposed-weights.ts); the decode set holds every layer.
  // Only float32 weights are transposed (models/weight-operand.ts): a half or NF4 base is multiplied as stored.
  const transposes = actorStorage === 'f32';
  // rollout.dtype=bfloat16|float16: decode steps read a half copy of a float32 actor, multiplied as stored
  // (ppo/generation/rollout-weights.ts), and a half KV cache.
  const cacheDtype = rolloutDtype(config);
  const actorCompute = computeDtype(config, 'actor');
  // free_cache_engine: the rollout frees its decoders and its copy of the actor when it ends, and the trunks their
  // work buffers before it starts (ppo/trainer.ts generate), so the copy is a rollout phase's item, not resident.
  // Under mixed precision in the same dtype the rollout decodes from the actor's compute copy (below), never freed.
  const freeCache = config.actor_rollout_ref.rollout.free_cache_engine;
  const rolloutCopy: MemoryItem | null =
    cacheDtype !== 'f32' && actorStorage === 'f32' && cacheDtype !== actorCompute
      ? {
          what: `rollout copy of the actor${dtypeNote(cacheDtype, actor)}`,
          bytes: storedBytes(actor, cacheDtype),
          key: 'rollout copy',
        }
      : null;
  // Under LoRA the copy is of the frozen base, the same at every rollout: resident without free_cache_engine (also
  // through validation, which frees the rollout's decoders), else as planMemory decides.
  const frozenCopy = rolloutCopy !== null && lora !== null;
  const frozenRolloutCopy = frozenCopy && freeCache;
  const keepsRolloutCopy = frozenCopy && (!freeCache || keepCopy);
  if (rolloutCopy && (!freeCache || keepsRolloutCopy))
    resident.push({
      what: `${rolloutCopy.what}${freeCache ? ', kept: its base is frozen' : ''}`,
      bytes: rolloutCopy.bytes,
    });
  // fsdp_config.dtype=bfloat16|float16 (mixed precision): the trunk's compute copy of the float32 master
  // (models/half-parameter-copy.ts), multiplied as stored, so no training-forward transposed set.
  if (actorCompute !== 'f32')
    resident.push({
      what: `actor compute copy${dtypeNote(actorCompute, actor)}${cacheDtype === actorCompute ? ", also the rollout's" : ''}`,
      bytes: storedBytes(actor, actorCompute),
    });
  const transposesActor = transposes && transposesLayerMatrices(actor, device.maxBindingBytes);
  if (transposesActor && cacheDtype === 'f32' && device.decodeTransposedWeights) {
    const transposed = new Set(decodeTransposedWeightNames(actor));
    resident.push({
      what: 'actor weights transposed for decode steps',
      bytes: parameterCount(actor, (name) => transposed.has(name)) * F32,
    });
  } else if (transposesActor && actorCompute === 'f32' && device.transposedWeights) {
    resident.push({
      what: 'actor layer weights transposed (training forward)',
      bytes: layerWeightElements(actor) * F32,
    });
  }
  const hasReference = config.algorithm.use_kl_in_reward || config.actor_rollout_ref.actor.use_kl_loss;
  if (hasReference && !lora) {
    const dtype = frozenStorage(config, 'reference', actor.torchDtype);
    resident.push({ what: `reference parameters${dtypeNote(dtype, actor)}`, bytes: storedBytes(actor, dtype) });
  }
  // Critic LoRA: the frozen base in its stored dtype; adapters and the score head (PEFT's modules_to_save) train.
  const criticLora = critic ? criticLoraSettings(config) : null;
  if (critic) {
    const dtype = weightDtype(config, 'critic', critic.torchDtype);
    resident.push({ what: `critic parameters${dtypeNote(dtype, critic)}`, bytes: storedBytes(critic, dtype) });
    if (!config.critic.freeze) {
      const trained = criticLora
        ? [...loraEntries(critic, criticLora), ...headEntries(critic)]
        : parameterEntries(critic);
      const trainedBytes = trained.reduce((n, e) => n + elementCount(e.shape), 0) * F32;
      if (criticLora)
        resident.push({ what: `critic LoRA adapters (r=${criticLora.rank}) + score`, bytes: trainedBytes });
      resident.push({ what: criticLora ? 'critic adapter gradients' : 'critic gradients', bytes: trainedBytes });
      moments(
        criticLora ? 'critic adapter' : 'critic',
        trained,
        config.critic.optim.optimizer,
        config.critic.model.fsdp_config.optimizer_offload,
      );
      const criticCompute = computeDtype(config, 'critic');
      if (criticCompute !== 'f32')
        resident.push({
          what: `critic compute copy${dtypeNote(criticCompute, critic)}`,
          bytes: storedBytes(critic, criticCompute),
        });
      // Only float32 weights are transposed (a half base or compute copy is multiplied as stored).
      else if (device.transposedWeights && dtype === 'f32' && transposesLayerMatrices(critic, device.maxBindingBytes))
        resident.push({
          what: 'critic layer weights transposed (training forward)',
          bytes: layerWeightElements(critic) * F32,
        });
    }
  }
  if (rewardModel) {
    const dtype = frozenStorage(config, 'reward_model', rewardModel.torchDtype);
    resident.push({
      what: `reward model parameters${dtypeNote(dtype, rewardModel)}`,
      bytes: storedBytes(rewardModel, dtype),
    });
  }
  const residentBytes = resident.reduce((s, i) => s + i.bytes, 0);

  const phases: PhasePlan[] = [];
  // Every buffer allocated so far, by key, at its largest.
  const allocated = new Map<string, number>();
  /** The keys allocated at each phase's peak. */
  const heldAt = new Map<PhasePlan, Set<string>>();
  /** Frees the buffers whose key starts with one of `prefixes`. */
  const free = (...prefixes: string[]) => {
    for (const key of [...allocated.keys()]) if (prefixes.some((p) => key.startsWith(p))) allocated.delete(key);
  };
  const phase = (name: string, items: MemoryItem[], largestTensor: MemoryItem) => {
    for (const { key, bytes } of items) allocated.set(key!, Math.max(allocated.get(key!) ?? 0, bytes));
    const bytes = items.reduce((s, i) => s + i.bytes, 0);
    const held = [...allocated.values()].reduce((s, b) => s + b, 0);
    const plan = { phase: name, items, bytes, keptBytes: held - bytes, peakBytes: residentBytes + held, largestTensor };
    phases.push(plan);
    heldAt.set(plan, new Set(allocated.keys()));
  };
  const loraRank = lora ? lora.rank : 0;
  /** The trunk's largest tensor a kernel binds whole: attention's (`attention`), or a window of rows of the MLP's or
   *  of the other row-wise activations where those are above one binding (models/row-chunks.ts: windows are views of
   *  the activations, so they add no memory). A window that cannot bind is a problem. */
  const trunkBinding = (
    name: string,
    trunk: ReturnType<typeof trunkActivations>,
    tokens: number,
    attention: MemoryItem,
  ): MemoryItem => {
    const window = (what: string, widths: number[]): MemoryItem => {
      let rows = tokens;
      try {
        rows = rowChunks(tokens, widths, device.maxBindingBytes, alignBytes)[0].rows;
      } catch (err) {
        problems.push(`${name}: ${(err as Error).message}`);
      }
      const bytes = rows * Math.max(...widths) * F32;
      return { what: rows === tokens ? 'widest activation' : `${what} (${rows} of ${tokens} rows)`, bytes };
    };
    const tensors = [window('MLP gate/up window', trunk.mlpWidths), window('row window', trunk.rowWidths), attention];
    if (tensors.every((t) => t.what === 'widest activation' || t.what === 'attention q/k/v'))
      return { what: 'widest activation', bytes: Math.max(...tensors.map((t) => t.bytes)) };
    return tensors.reduce((x, y) => (y.bytes > x.bytes ? y : x));
  };
  /** Attention over a micro-batch of `sequences`: bound whole where its q/k/v fits one binding, else over windows of
   *  each sequence's rows (models/attention-windows.ts), which bind a window's q/k/v and one sequence's keys, and
   *  gather every token's keys and values into compact copies (`items`). What cannot bind is a problem: then one
   *  sequence's keys, T × NKV·HS floats, are the remaining limit. */
  const attention = (
    name: string,
    c: DecoderConfig,
    sequences: number,
    key: string,
  ): { binding: MemoryItem; items: MemoryItem[] } => {
    const tokens = sequences * sequenceLength;
    const row = Math.max(qkvWidth(c), c.numHeads * c.headDim) * F32;
    const whole = { binding: { what: 'attention q/k/v', bytes: tokens * row }, items: [] };
    let S: number | null;
    try {
      S = attentionWindowRows(c, sequences, sequenceLength, device.maxBindingBytes, alignBytes);
    } catch (err) {
      const message = (err as Error).message;
      const fix = /keys/.test(message) ? ' — shorten data.max_prompt_length or data.max_response_length' : '';
      problems.push(`${name}: ${message}${fix}`);
      return whole;
    }
    if (S === null) return whole;
    const kv = c.numKvHeads * c.headDim * F32;
    const window = { what: `attention window (${S} of ${sequenceLength} rows)`, bytes: S * row };
    const keys = { what: "a sequence's attention keys", bytes: sequenceLength * kv };
    return {
      binding: keys.bytes > window.bytes ? keys : window,
      items: [
        {
          what: `attention keys and values gathered for its windows (${sequences} × ${sequenceLength} tokens)`,
          bytes: 2 * tokens * kv,
          key,
        },
      ],
    };
  };
  /** The LM head over `tokens` tokens: its logits chunk (kernels/layers/lm-head.ts: one scratch per size, shared by
   *  every model) and the model's per-token outputs, row statistics and hidden-state gradient. */
  const lmHead = (c: DecoderConfig, model: string, tokens: number): { items: MemoryItem[]; chunk: number } => {
    const chunk = lmHeadDefaultChunkWidth(tokens, c.hiddenSize, c.vocabSize, device.maxBindingBytes, alignBytes);
    return {
      chunk,
      items: [
        {
          what: `LM head logits chunk (${tokens} × ${chunk}, shared by every model)`,
          bytes: tokens * chunk * F32,
          key: `lm-head logits ${tokens * chunk}`,
        },
        { what: 'LM head per-token statistics, dhidden', bytes: tokens * (c.hiddenSize + 7) * F32, key: `${model} lm` },
      ],
    };
  };
  // Rollout (ppo/generation/continuous-batching.ts): as many slots as ppo/generation/slots.ts lets it decode at once,
  // from the same budget the trainer gives it, in two IncrementalDecoders kept between rollouts — the decode batch's
  // (its KV cache of continuousCacheCapacity slots, one token's buffers and the sampling logits of each row) and the
  // one newcomers' prompts are prefilled in (a cache of the prompt's length, one call's activations — the whole
  // prompt's, or a chunk's where those outgrow a binding — and the logits of each row's last token). Validation
  // generates the whole validation set through the same decoders, grown to its size, and frees them when it ends
  // (ppo/trainer.ts validate): a phase after the step's (a validation between steps, and the final one, holds
  // everything else the step left) whose decoders no later phase keeps.
  const responseLength = config.data.max_response_length;
  const rollout = (name: string, sequences: number, set: PromptSet | undefined) => {
    const promptLength = Math.min(config.data.max_prompt_length, set?.longest ?? Infinity);
    const capacity = continuousCacheCapacity(promptLength, responseLength, DEFAULT_READ_EVERY);
    const shape = { promptLength, capacity, samples: sequences, cacheDtype, loraRank };
    let S = 1;
    try {
      S = rolloutSlots({ maxBufferSize: Infinity, maxStorageBufferBindingSize: device.maxBindingBytes }, actor, shape, {
        memoryBudgetBytes: rolloutBudgetBytes,
      });
    } catch (err) {
      problems.push((err as Error).message);
    }
    let memory: ReturnType<typeof rolloutMemory> | null = null;
    try {
      memory = rolloutMemory(device.maxBindingBytes, actor, shape, S);
    } catch {
      // One sequence outgrows a binding: rolloutSlots said so above.
      return;
    }
    phase(
      `${name} (${S} of ${sequences} sequences at once)`,
      [
        ...(freeCache && rolloutCopy && !keepsRolloutCopy ? [rolloutCopy] : []),
        ...memory.items,
        {
          // The sampler's rows, the experience's (N, R) tensors (about 15) and the updates' sequence buffers (7 of
          // (rows, S), 11 of (rows, R)): each a few KiB, counted together once as 16 floats a sequence token (a
          // live-buffer list at a measured peak held 16,800 B of them for 24 sequences of 15 tokens).
          what: `sampler rows, experience and update per-token tensors (${sequences} × ${promptLength + responseLength} tokens)`,
          bytes: sequences * (promptLength + responseLength) * 16 * F32,
          key: 'per-sequence buffers',
        },
      ],
      memory.largest,
    );
    // Validation frees its decoders whatever free_cache_engine says (ppo/trainer.ts validate).
    if (freeCache || name === 'validation rollout') free('rollout ');
  };
  rollout('rollout', sizes.sequences, prompts.training);

  // Each model (`model`: the actor, the reference — its own work buffers even when it reads the actor's base —,
  // the critic, the reward model) keeps its forward's and its update's workspaces apart (models/decoder.ts).
  // Mixed precision (fsdp_config.dtype): the actor's and critic's trunks round their residual stream to it.
  const halfCompute = (model: string) =>
    (model === 'actor' || model === 'critic') && computeDtype(config, model) !== 'f32';
  const forward = (
    name: string,
    c: DecoderConfig,
    model: string,
    sequences: number,
    head: 'lm' | 'value',
    rank = 0,
  ) => {
    const tokens = sequences * sequenceLength;
    const trunk = trunkActivations(c, tokens, false, false, rank, halfCompute(model));
    const items: MemoryItem[] = [
      {
        what: `activations (${sequences} × ${sequenceLength} tokens, two layers' sets)`,
        bytes: trunk.bytes,
        key: `${model} forward`,
      },
    ];
    if (head === 'lm') items.push(...lmHead(c, model, tokens).items);
    const windows = attention(name, c, sequences, `${model} attention forward`);
    phase(name, [...items, ...windows.items], trunkBinding(name, trunk, tokens, windows.binding));
  };
  const update = (
    name: string,
    c: DecoderConfig,
    model: string,
    sequences: number,
    head: 'lm' | 'value',
    checkpointed: boolean,
    rank = 0,
  ) => {
    const tokens = sequences * sequenceLength;
    const trunk = trunkActivations(c, tokens, true, checkpointed, rank, halfCompute(model));
    const items: MemoryItem[] = [
      {
        what: checkpointed
          ? `every layer's input${halfCompute(model) ? ` (${computeDtype(config, model as 'actor')})` : ''} and one ` +
            `layer's activations (${sequences} × ${sequenceLength} tokens, gradient checkpointing) and backward scratch`
          : `activations of every layer (${sequences} × ${sequenceLength} tokens) and backward scratch`,
        bytes: trunk.bytes,
        key: `${model} update`,
      },
    ];
    if (head === 'lm') {
      const lm = lmHead(c, model, tokens);
      const [logitsChunk, statistics] = lm.items;
      // A vocabulary of one chunk keeps the forward's logits for the backward (kernels/layers/lm-head.ts savedLogits),
      // and both passes compute in them instead of the logits scratch, which this size then never allocates.
      items.push(
        lm.chunk >= c.vocabSize
          ? {
              what: 'LM head logits kept for the backward',
              bytes: tokens * c.vocabSize * F32,
              key: `${model} saved logits`,
            }
          : logitsChunk,
        statistics,
      );
    }
    const windows = attention(name, c, sequences, `${model} attention update`);
    phase(name, [...items, ...windows.items], trunkBinding(name, trunk, tokens, windows.binding));
  };

  const logProbMicro = config.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu ?? sizes.sequences;
  forward('old log-probs', actor, 'actor', logProbMicro, 'lm', loraRank);
  if (hasReference) {
    forward(
      'reference log-probs',
      actor,
      'reference',
      config.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu ?? sizes.sequences,
      'lm',
    );
  }
  if (rewardModel)
    forward(
      'reward model',
      rewardModel,
      'reward model',
      config.reward_model.micro_batch_size_per_gpu ?? sizes.sequences,
      'value',
    );
  if (critic) {
    forward(
      'values',
      critic,
      'critic',
      config.critic.forward_micro_batch_size_per_gpu ?? sizes.sequences,
      'value',
      criticLora?.rank ?? 0,
    );
    if (!config.critic.freeze)
      update(
        'critic update',
        critic,
        'critic',
        sizes.criticMicroBatch,
        'value',
        config.critic.model.enable_gradient_checkpointing,
        criticLora?.rank ?? 0,
      );
  }
  update(
    'actor update',
    actor,
    'actor',
    sizes.actorMicroBatch,
    'lm',
    config.actor_rollout_ref.model.enable_gradient_checkpointing,
    loraRank,
  );
  // With free_cache_engine the first rollout is not the largest: every later one runs on what the step's phases
  // keep beyond their trunks' activations (LM-head scratch, the updates' kept logits and statistics).
  if (freeCache) {
    free(...[...allocated.keys()].filter((k) => k.endsWith(' forward') || k.endsWith(' update')));
    rollout('rollout after an update', sizes.sequences, prompts.training);
  }
  const validationSequences = (prompts.validation?.count ?? 0) * config.actor_rollout_ref.rollout.val_kwargs.n;
  if (validationSequences > 0) rollout('validation rollout', validationSequences, prompts.validation);

  const peakBytes = Math.max(...phases.map((p) => p.peakBytes));
  const budgetBytes = device.memory.bytes;
  if (peakBytes > budgetBytes) {
    const worst = phases.reduce((a, b) => (b.peakBytes > a.peakBytes ? b : a));
    const keysOf = (p: PhasePlan) => PHASE_KEYS[p.phase.split(' (')[0]] ?? [];
    const keys = keysOf(worst);
    // What earlier phases keep allocated counts at this one's peak too: their keys shrink it (not those of a phase
    // whose buffers were freed since, as free_cache_engine frees the rollout's).
    const held = heldAt.get(worst)!;
    const earlier = [
      ...new Set(
        phases
          .slice(0, phases.indexOf(worst))
          .filter((p) =>
            p.items.some(
              // The per-sequence buffers follow the batch, not these keys.
              (i) => i.key !== 'per-sequence buffers' && held.has(i.key!) && !worst.items.some((w) => w.key === i.key),
            ),
          )
          .flatMap(keysOf),
      ),
    ].filter((k) => !keys.includes(k));
    const kept =
      worst.keptBytes > 0 && earlier.length > 0
        ? `; of it, ${gib(worst.keptBytes)} stays allocated from earlier phases: lower ${earlier.join(', ')}`
        : '';
    const guessed =
      device.memory.source === 'unknown' ? " (a guess: set WEBGPU_DEVICE_MEMORY to the device's memory)" : '';
    problems.push(
      `peak ${gib(peakBytes)} (${worst.phase}) is above the memory budget of ${gib(budgetBytes)}${guessed}: ` +
        (residentBytes > budgetBytes
          ? `the models alone take ${gib(residentBytes)} — use a smaller model or fewer layers`
          : `lower ${keys.join(', ')}${kept}`),
    );
  }
  return {
    resident,
    residentBytes,
    host,
    phases,
    peakBytes,
    budgetBytes,
    budgetLabel: device.memory.label,
    rolloutBudgetBytes,
    rolloutBudgetShrunk: false,
    keepsRolloutCopy,
    problems,
    frozenRolloutCopy,
  };
}

const PHASE_KEYS: Record<string, string[]> = {
  rollout: ['actor_rollout_ref.rollout.gpu_memory_utilization', 'data.max_response_length'],
  'rollout after an update': ['actor_rollout_ref.rollout.gpu_memory_utilization', 'data.max_response_length'],
  'validation rollout': ['actor_rollout_ref.rollout.gpu_memory_utilization', 'data.max_response_length'],
  'old log-probs': ['actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu'],
  'reference log-probs': ['actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu'],
  'reward model': ['reward_model.micro_batch_size_per_gpu'],
  values: ['critic.forward_micro_batch_size_per_gpu'],
  'critic update': ['critic.ppo_micro_batch_size_per_gpu'],
  'actor update': ['actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu'],
};

function mib(bytes: number): string {
  return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}

function gib(bytes: number): string {
  return `${(bytes / 2 ** 30).toFixed(2)} GiB`;
}

/** This device's binding limit and memory (`memory`, or else the engine's: engine/device-memory.ts). */
export function deviceMemory(engine: Engine, memory: DeviceMemorySize = engine.memory): DeviceMemory {
  return {
    maxBindingBytes: engine.maxBindingBytes,
    bindingAlignBytes: engine.caps.minStorageBufferOffsetAlignment,
    memory,
    transposedWeights: chooseVariant('transposed-weights', transposedWeightVariants, engine.caps, engine.knobs).value,
    decodeTransposedWeights: chooseVariant('decode-weights', transposedWeightVariants, engine.caps, engine.knobs).value,
  };
}

/** The plan as printed at the start of a run (`detail`: each phase's parts too, as `node tools/bench.js memory`). */
export function formatMemoryPlan(plan: MemoryPlan, detail = true): string[] {
  const lines = [
    `memory plan: resident ${gib(plan.residentBytes)}, peak ${gib(plan.peakBytes)} of a ${gib(plan.budgetBytes)} ` +
      `budget, ` +
      `the rollout's ${gib(plan.rolloutBudgetBytes)} of it (actor_rollout_ref.rollout.gpu_memory_utilization` +
      (plan.rolloutBudgetShrunk ? ', less what the rest of the run needs)' : ')'),
    `  budget: ${plan.budgetLabel}`,
  ];
  for (const item of plan.resident) lines.push(`  ${item.what.padEnd(28)} ${gib(item.bytes).padStart(10)}`);
  for (const item of plan.host) lines.push(`  ${item.what.padEnd(28)} ${gib(item.bytes).padStart(10)} in host memory`);
  for (const p of plan.phases) {
    lines.push(
      `  ${p.phase.padEnd(28)} +${gib(p.bytes).padStart(9)} on ${gib(p.keptBytes)} kept  peak ` +
        `${gib(p.peakBytes)}; largest tensor ` +
        `${mib(p.largestTensor.bytes)} (${p.largestTensor.what})`,
    );
    if (detail) for (const item of p.items) lines.push(`    ${item.what}: ${mib(item.bytes)}`);
  }
  for (const problem of plan.problems) lines.push(`  does not fit: ${problem}`);
  return lines;
}
