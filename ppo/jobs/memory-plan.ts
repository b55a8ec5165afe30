// The run's memory plan, computed from the configuration and the models' shapes before anything is allocated:
// what stays resident (parameters, gradients, AdamW moments of each model) and what each phase adds on top
// (rollout: KV cache, prefill activations, sampling logits; log-prob and value forwards; actor and critic updates:
// activations of one micro-batch), the peak, and what cannot work — a single tensor above the device's binding
// limit that no kernel splits, or a peak above the memory budget — each with the keys that would make it fit.
// Estimates follow the tensors models/ allocates (float32, except frozen weights — the reference, reward model,
// frozen critic, the actor's LoRA base — whose matrices are stored in bf16/f16 by their fsdp_config.model_dtype or
// their checkpoint's torch_dtype); small per-sequence buffers are left out.
// Browser-safe.
import type { DecoderConfig } from '../../models/hf-config.ts';
import { parameterEntries, qkvWidth, type WeightStorage } from '../../models/parameter-layout.ts';
import {
  bytesPerElement,
  chooseVariant,
  elementCount,
  type DeviceMemorySize,
  type Engine,
} from '../../engine/index.ts';
import { transposedWeightVariants } from '../../kernels/util/transpose.ts';
import { batchSizes, usesCritic, actorLoraSettings, actorBaseStorage, weightDtype, type PpoConfig } from '../config.ts';
import { loraArenaElements, type LoraSettings } from '../../models/lora.ts';
import { rolloutSlots } from '../generation/slots.ts';
import { decodeTransposedWeightNames } from '../../models/incremental-decoder.ts';

const F32 = 4;
/** The LM head's logits scratch is at most this (kernels/layers/lm-head.ts). */
const LM_HEAD_SCRATCH_BYTES = 32 << 20;

export interface DeviceMemory {
  /** Largest storage binding (maxStorageBufferBindingSize). */
  maxBindingBytes: number;
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
}

export interface PhasePlan {
  phase: string;
  /** What the phase allocates beyond the resident tensors. */
  items: MemoryItem[];
  bytes: number;
  /** Resident + this phase. */
  peakBytes: number;
  /** Its largest single tensor that kernels bind whole. */
  largestTensor: MemoryItem;
}

export interface MemoryPlan {
  resident: MemoryItem[];
  residentBytes: number;
  phases: PhasePlan[];
  peakBytes: number;
  budgetBytes: number;
  /** What the budget is: the device's memory, of which GPU or system RAM, and where the size came from. */
  budgetLabel: string;
  /** The rollout's share of it (rollout.gpu_memory_utilization × budgetBytes). */
  rolloutBudgetBytes: number;
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

/** Bytes of a model's parameters with its matrices stored as `storage` (a frozen model's). */
export function parameterBytes(c: DecoderConfig, storage: WeightStorage = 'f32'): number {
  return parameterEntries(c, storage).reduce(
    (n, e) => n + elementCount(e.shape) * bytesPerElement(e.dtype ?? 'f32'),
    0,
  );
}

/** " (bf16 matrices)" for a half dtype, the NF4 split for nf4, else nothing. */
function dtypeNote(storage: WeightStorage, c: DecoderConfig): string {
  if (storage === 'nf4') return ` (nf4 layer matrices, ${parameterEntries(c, 'nf4')[0].dtype} embedding)`;
  return storage === 'f32' ? '' : ` (${storage} matrices)`;
}

/** Float32 elements per token of a decoder trunk's activations. */
function activationsPerToken(c: DecoderConfig, training: boolean): { perLayer: number; fixed: number; widest: number } {
  const C = c.hiddenSize;
  const W = qkvWidth(c);
  const I = c.intermediateSize;
  const heads = c.numHeads * c.headDim;
  const qkv = c.qkNorm ? 2 * W + c.numHeads + c.numKvHeads : W;
  const perLayer = 4 * C + 2 + qkv + heads + c.numHeads + 3 * I;
  const backward = 2 * C + 3 * I + heads + (c.qkNorm ? 2 * W : W) + 1;
  return { perLayer, fixed: 2 * C + 1 + (training ? backward : 0), widest: Math.max(2 * I, W, C, heads) };
}

/** Trunk activations of `tokens` tokens: every layer's when training, one layer's (reused) otherwise; with
 *  gradient checkpointing every layer's input and one layer's set, recomputed layer by layer in the backward
 *  (models/decoder.ts's checkpointed workspace). */
function trunkActivations(
  c: DecoderConfig,
  tokens: number,
  training: boolean,
  checkpointed = false,
): { bytes: number; widestRow: number } {
  const { perLayer, fixed, widest } = activationsPerToken(c, training);
  const layers = !training
    ? perLayer
    : checkpointed
      ? perLayer + (c.numLayers - 1) * c.hiddenSize
      : perLayer * c.numLayers;
  return { bytes: tokens * (layers + fixed) * F32, widestRow: widest * F32 };
}

/** Float32 elements of a trunk's layer weight matrices (the projections a training forward may transpose). */
function layerWeightElements(c: DecoderConfig): number {
  return parameterCount(c, (name, shape) => name.startsWith('model.layers.') && shape.length === 2);
}

function lmHeadScratch(c: DecoderConfig, tokens: number, maxBindingBytes: number): number {
  return (
    Math.min(LM_HEAD_SCRATCH_BYTES, maxBindingBytes / 4, tokens * c.vocabSize * F32) + tokens * (3 + c.hiddenSize) * F32
  );
}

function phase(name: string, items: MemoryItem[], residentBytes: number, largestTensor: MemoryItem): PhasePlan {
  const bytes = items.reduce((s, i) => s + i.bytes, 0);
  return { phase: name, items, bytes, peakBytes: residentBytes + bytes, largestTensor };
}

/** The memory plan of `config` with these models on this device, validating on `validationPrompts` prompts. */
export function planMemory(
  config: PpoConfig,
  models: PlanModels,
  device: DeviceMemory,
  validationPrompts = 0,
): MemoryPlan {
  const { actor, rewardModel } = models;
  const critic = usesCritic(config) ? models.critic : null;
  const sizes = batchSizes(config);
  const promptLength = config.data.max_prompt_length;
  const sequenceLength = promptLength + config.data.max_response_length;
  const problems: string[] = [];
  const rolloutBudgetBytes = config.actor_rollout_ref.rollout.gpu_memory_utilization * device.memory.bytes;

  const resident: MemoryItem[] = [];
  // LoRA: the frozen base in its stored dtype, gradients and moments of the adapters only, and the reference reads
  // the actor's base.
  const lora = models.actorLora !== undefined ? models.actorLora : actorLoraSettings(config);
  const actorStorage = lora ? actorBaseStorage(config, actor.torchDtype) : 'f32';
  const actorParams = parameterBytes(actor, actorStorage);
  resident.push({ what: `actor parameters${dtypeNote(actorStorage, actor)}`, bytes: actorParams });
  const trainedBytes = lora ? loraArenaElements(actor, lora) * F32 : actorParams;
  if (lora) resident.push({ what: `actor LoRA adapters (r=${lora.rank})`, bytes: trainedBytes });
  resident.push({ what: lora ? 'actor adapter gradients' : 'actor gradients', bytes: trainedBytes });
  resident.push({ what: lora ? 'actor adapter AdamW moments' : 'actor AdamW moments', bytes: 2 * trainedBytes });
  // Transposed copies (CPU devices) stay allocated from their first use on: one set per arena, shared by the
  // actor's training forwards and its decode steps (models/transposed-weights.ts); the decode set holds every layer.
  // Only float32 weights are transposed (models/weight-operand.ts): a half or NF4 base is multiplied as stored.
  const transposes = actorStorage === 'f32';
  if (transposes && device.decodeTransposedWeights) {
    const transposed = new Set(decodeTransposedWeightNames(actor));
    resident.push({
      what: 'actor weights transposed for decode steps',
      bytes: parameterCount(actor, (name) => transposed.has(name)) * F32,
    });
  } else if (transposes && device.transposedWeights) {
    resident.push({
      what: 'actor layer weights transposed (training forward)',
      bytes: layerWeightElements(actor) * F32,
    });
  }
  const hasReference = config.algorithm.use_kl_in_reward || config.actor_rollout_ref.actor.use_kl_loss;
  if (hasReference && !lora) {
    const dtype = weightDtype(config, 'reference', actor.torchDtype);
    resident.push({ what: `reference parameters${dtypeNote(dtype, actor)}`, bytes: parameterBytes(actor, dtype) });
  }
  if (critic) {
    const criticParams = parameterCount(critic) * F32;
    const dtype = weightDtype(config, 'critic', critic.torchDtype);
    resident.push({ what: `critic parameters${dtypeNote(dtype, critic)}`, bytes: parameterBytes(critic, dtype) });
    if (!config.critic.freeze) {
      resident.push({ what: 'critic gradients', bytes: criticParams });
      resident.push({ what: 'critic AdamW moments', bytes: 2 * criticParams });
      if (device.transposedWeights)
        resident.push({
          what: 'critic layer weights transposed (training forward)',
          bytes: layerWeightElements(critic) * F32,
        });
    }
  }
  if (rewardModel) {
    const dtype = weightDtype(config, 'reward_model', rewardModel.torchDtype);
    resident.push({
      what: `reward model parameters${dtypeNote(dtype, rewardModel)}`,
      bytes: parameterBytes(rewardModel, dtype),
    });
  }
  const residentBytes = resident.reduce((s, i) => s + i.bytes, 0);

  const phases: PhasePlan[] = [];
  // Rollout: the KV cache of every sequence in flight (as many slots as ppo/generation/slots.ts lets it decode at once,
  // from the same budget the trainer gives it), the prompt prefill's activations, the sampling logits. Validation
  // generates the whole validation set through the same slots, so a large set decodes more sequences at once than a
  // batch.
  const rollout = (name: string, sequences: number) => {
    let S = 1;
    try {
      S = rolloutSlots(
        { maxBufferSize: Infinity, maxStorageBufferBindingSize: device.maxBindingBytes },
        actor,
        { promptLength, capacity: sequenceLength, samples: sequences },
        { memoryBudgetBytes: rolloutBudgetBytes },
      );
    } catch (err) {
      problems.push((err as Error).message);
    }
    const kvWidth = actor.numKvHeads * actor.headDim;
    const kvLayer = S * sequenceLength * kvWidth * F32;
    const prefill = trunkActivations(actor, S * promptLength, false);
    const samplingLogits = S * actor.vocabSize * F32;
    phases.push(
      phase(
        `${name} (${S} of ${sequences} sequences at once)`,
        [
          {
            what: `KV cache (${S} sequences × ${sequenceLength} tokens × ${actor.numLayers} layers × K,V)`,
            bytes: 2 * actor.numLayers * kvLayer + kvLayer,
          },
          { what: `prefill activations (${S} × ${promptLength} prompt tokens)`, bytes: prefill.bytes },
          { what: `sampling logits (${S} × ${actor.vocabSize})`, bytes: samplingLogits },
        ],
        residentBytes,
        largest([
          { what: 'KV cache of one layer', bytes: kvLayer },
          { what: 'sampling logits', bytes: samplingLogits },
          { what: 'widest prefill activation', bytes: S * promptLength * prefill.widestRow },
        ]),
      ),
    );
  };
  rollout('rollout', sizes.sequences);
  const validationSequences = validationPrompts * config.actor_rollout_ref.rollout.val_kwargs.n;
  if (validationSequences > 0) rollout('validation rollout', validationSequences);

  const forward = (name: string, c: DecoderConfig, sequences: number, head: 'lm' | 'value', key: string) => {
    const tokens = sequences * sequenceLength;
    const trunk = trunkActivations(c, tokens, false);
    const items = [
      { what: `activations (${sequences} × ${sequenceLength} tokens, one layer at a time)`, bytes: trunk.bytes },
    ];
    if (head === 'lm')
      items.push({
        what: 'LM head (logits chunk, per-token statistics)',
        bytes: lmHeadScratch(c, tokens, device.maxBindingBytes),
      });
    phases.push(phase(name, items, residentBytes, { what: 'widest activation', bytes: tokens * trunk.widestRow }));
    checkMicroBatch(problems, name, key, sequences, sequenceLength * trunk.widestRow, device.maxBindingBytes);
  };
  const update = (
    name: string,
    c: DecoderConfig,
    sequences: number,
    head: 'lm' | 'value',
    key: string,
    checkpointed: boolean,
  ) => {
    const tokens = sequences * sequenceLength;
    const trunk = trunkActivations(c, tokens, true, checkpointed);
    const items = [
      {
        what: checkpointed
          ? `every layer's input and one layer's activations (${sequences} × ${sequenceLength} tokens, gradient ` +
            `checkpointing) and backward scratch`
          : `activations of every layer (${sequences} × ${sequenceLength} tokens) and backward scratch`,
        bytes: trunk.bytes,
      },
    ];
    if (head === 'lm')
      items.push({ what: 'LM head (logits chunk, dhidden)', bytes: lmHeadScratch(c, tokens, device.maxBindingBytes) });
    // A vocabulary of one chunk keeps the forward's logits for the backward (kernels/layers/lm-head.ts savedLogits).
    const logits = tokens * c.vocabSize * F32;
    if (head === 'lm' && logits <= Math.min(LM_HEAD_SCRATCH_BYTES, device.maxBindingBytes / 4))
      items.push({ what: 'LM head logits kept for the backward', bytes: logits });
    phases.push(phase(name, items, residentBytes, { what: 'widest activation', bytes: tokens * trunk.widestRow }));
    checkMicroBatch(problems, name, key, sequences, sequenceLength * trunk.widestRow, device.maxBindingBytes);
  };

  const logProbMicro = config.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu ?? sizes.sequences;
  forward('old log-probs', actor, logProbMicro, 'lm', 'actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu');
  if (hasReference) {
    forward(
      'reference log-probs',
      actor,
      config.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu ?? sizes.sequences,
      'lm',
      'actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu',
    );
  }
  if (rewardModel)
    forward(
      'reward model',
      rewardModel,
      config.reward_model.micro_batch_size_per_gpu ?? sizes.sequences,
      'value',
      'reward_model.micro_batch_size_per_gpu',
    );
  if (critic) {
    forward(
      'values',
      critic,
      config.critic.forward_micro_batch_size_per_gpu ?? sizes.sequences,
      'value',
      'critic.forward_micro_batch_size_per_gpu',
    );
    if (!config.critic.freeze)
      update(
        'critic update',
        critic,
        sizes.criticMicroBatch,
        'value',
        'critic.ppo_micro_batch_size_per_gpu',
        config.critic.model.enable_gradient_checkpointing,
      );
  }
  update(
    'actor update',
    actor,
    sizes.actorMicroBatch,
    'lm',
    'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu',
    config.actor_rollout_ref.model.enable_gradient_checkpointing,
  );

  const peakBytes = Math.max(...phases.map((p) => p.peakBytes));
  const budgetBytes = device.memory.bytes;
  if (peakBytes > budgetBytes) {
    const worst = phases.reduce((a, b) => (b.peakBytes > a.peakBytes ? b : a));
    const keys = PHASE_KEYS[worst.phase.split(' (')[0]] ?? [];
    const guessed =
      device.memory.source === 'unknown' ? " (a guess: set WEBGPU_DEVICE_MEMORY to the device's memory)" : '';
    problems.push(
      `peak ${gib(peakBytes)} (${worst.phase}) is above the memory budget of ${gib(budgetBytes)}${guessed}: ` +
        (residentBytes > budgetBytes
          ? `the models alone take ${gib(residentBytes)} — use a smaller model or fewer layers`
          : `lower ${keys.join(', ')}`),
    );
  }
  return {
    resident,
    residentBytes,
    phases,
    peakBytes,
    budgetBytes,
    budgetLabel: device.memory.label,
    rolloutBudgetBytes,
    problems,
  };
}

const PHASE_KEYS: Record<string, string[]> = {
  rollout: ['actor_rollout_ref.rollout.gpu_memory_utilization', 'data.max_response_length'],
  'validation rollout': ['actor_rollout_ref.rollout.gpu_memory_utilization', 'data.max_response_length'],
  'old log-probs': ['actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu'],
  'reference log-probs': ['actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu'],
  'reward model': ['reward_model.micro_batch_size_per_gpu'],
  values: ['critic.forward_micro_batch_size_per_gpu'],
  'critic update': ['critic.ppo_micro_batch_size_per_gpu'],
  'actor update': ['actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu'],
};

function largest(items: MemoryItem[]): MemoryItem {
  return items.reduce((a, b) => (b.bytes > a.bytes ? b : a));
}

/** A micro-batch whose widest activation (R, 2I) outgrows one binding fails at its first dispatch: say so now. */
function checkMicroBatch(
  problems: string[],
  phaseName: string,
  key: string,
  sequences: number,
  bytesPerSequence: number,
  maxBindingBytes: number,
): void {
  if (sequences * bytesPerSequence <= maxBindingBytes) return;
  const fits = Math.floor(maxBindingBytes / bytesPerSequence);
  problems.push(
    fits >= 1
      ? `${phaseName}: ${sequences} sequences per micro-batch need a ${mib(sequences * bytesPerSequence)} ` +
          `activation, above the ` +
          `${mib(maxBindingBytes)} binding limit — set ${key}=${fits} or less`
      : `${phaseName}: one sequence of data.max_prompt_length + data.max_response_length tokens needs a ` +
          `${mib(bytesPerSequence)} activation, ` +
          `above the ${mib(maxBindingBytes)} binding limit — shorten data.max_prompt_length or ` +
          `data.max_response_length`,
  );
}

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
      `the rollout's ${gib(plan.rolloutBudgetBytes)} of it (actor_rollout_ref.rollout.gpu_memory_utilization)`,
    `  budget: ${plan.budgetLabel}`,
  ];
  for (const item of plan.resident) lines.push(`  ${item.what.padEnd(28)} ${gib(item.bytes).padStart(10)}`);
  for (const p of plan.phases) {
    lines.push(
      `  ${p.phase.padEnd(28)} +${gib(p.bytes).padStart(9)}  peak ${gib(p.peakBytes)}; largest tensor ` +
        `${mib(p.largestTensor.bytes)} (${p.largestTensor.what})`,
    );
    if (detail) for (const item of p.items) lines.push(`    ${item.what}: ${mib(item.bytes)}`);
  }
  for (const problem of plan.problems) lines.push(`  does not fit: ${problem}`);
  return lines;
}
