// The trainer's configuration schema: verl's ppo_trainer.yaml keys and verl's defaults as of VERL_FOLLOWED (only those
// that mean something in this engine, plus algorithm.reward_mask_ratio, critic.freeze, trainer.seed and Search-R1's
// search keys), each with a one-line meaning, in ONE typed object. The loader (loader.ts) layers YAML files and
// command-line overrides on top; verl-compat.ts names the verl keys that are accepted without being keys here.
import { LOSS_AGG_MODES, POLICY_LOSS_MODES } from '../../kernels/ppo/ppo-vocabulary.ts';
import { policyLossModesHelp } from '../../kernels/ppo/policy-loss-modes.ts';
import {
  ADV_ESTIMATORS,
  SUM_PI_SQUARED_ESTIMATORS,
  advEstimatorsHelp,
  type AdvEstimator,
} from './advantage-estimator-table.ts';
import { ALL_LINEAR, LORA_MODULES } from '../../models/lora.ts';

/** The verl commit whose config tree and defaults the schema follows (--help, docs/training.md and README say so). */
export const VERL_FOLLOWED = { repo: 'verl-project/verl', commit: '1dda039b', date: '2026-08-22' } as const;

export type Kind = 'int' | 'float' | 'bool' | 'string' | 'strings' | 'floats' | 'files' | 'map' | 'numberOrString';
/** An OmegaConf interpolation written as a default, e.g. `${actor_rollout_ref.actor.ppo_epochs}`. */
type Interpolation = `\${${string}}${string}`;

interface Range {
  /** Completes "must be …". */
  what: string;
  test: (value: number) => boolean;
}

const positive: Range = { what: 'positive', test: (v) => v > 0 };
const nonNegative: Range = { what: '≥ 0', test: (v) => v >= 0 };
const unitInterval: Range = { what: 'in [0, 1]', test: (v) => v >= 0 && v <= 1 };
const openUnitInterval: Range = { what: 'in (0, 1)', test: (v) => v > 0 && v < 1 };
const probability: Range = { what: 'in (0, 1]', test: (v) => v > 0 && v <= 1 };

export class Key<T> {
  /** Phantom: the value type of this key in PpoConfig. */
  declare readonly valueType: T;

  constructor(
    readonly kind: Kind,
    readonly defaultValue: T | Interpolation,
    readonly help: string,
    readonly nullable = false,
    readonly range: Range | null = null,
    readonly choices: readonly string[] | null = null,
    /** kind 'map': the keys of each named entry (verl's distillation.teacher_models.<name>.{key, model_path}). */
    readonly entry: Readonly<Record<string, Key<unknown>>> | null = null,
  ) {}
}

const int = (value: number | Interpolation, help: string, range: Range | null = null) =>
  new Key<number>('int', value, help, false, range);
const optInt = (value: number | null | Interpolation, help: string, range: Range | null = null) =>
  new Key<number | null>('int', value, help, true, range);
const float = (value: number, help: string, range: Range | null = null) =>
  new Key<number>('float', value, help, false, range);
const optFloat = (value: number | null, help: string, range: Range | null = null) =>
  new Key<number | null>('float', value, help, true, range);
const bool = (value: boolean | Interpolation, help: string) => new Key<boolean>('bool', value, help);
const optBool = (value: boolean | null, help: string) => new Key<boolean | null>('bool', value, help, true);
const str = (value: string, help: string) => new Key<string>('string', value, help);
const optStr = (value: string | null | Interpolation, help: string) =>
  new Key<string | null>('string', value, help, true);
const oneOf = <C extends string>(value: C | Interpolation, choices: readonly C[], help: string) =>
  new Key<C>('string', value, help, false, null, choices);

function optimizerKeys(lr: number) {
  return {
    lr: float(lr, 'AdamW learning rate', nonNegative),
    lr_warmup_steps: int(-1, 'Linear warmup steps; negative: lr_warmup_steps_ratio × total steps'),
    lr_warmup_steps_ratio: float(0, 'Warmup as a fraction of the total training steps', unitInterval),
    lr_scheduler_type: oneOf(
      'constant',
      ['constant', 'cosine'],
      "Schedule after warmup (verl's deprecated spelling: warmup_style)",
    ),
    min_lr_ratio: float(0, 'cosine: the final learning rate as a fraction of lr', unitInterval),
    num_cycles: float(0.5, 'cosine: number of cosine half-periods × 2 over the run (0.5 decays once)', positive),
    weight_decay: float(0.01, 'AdamW decoupled weight decay', nonNegative),
    betas: new Key<number[]>('floats', [0.9, 0.999], 'AdamW β1, β2'),
    optimizer: oneOf(
      'AdamW',
      OPTIMIZERS,
      "AdamW, or AdamW8bit (with optimizer_impl=bitsandbytes.optim): bitsandbytes' blockwise 8-bit moments, 2 bytes " +
        'per weight plus 8 bytes per 256 instead of 8 (tensors under 4,096 values keep float32 moments) — for a full ' +
        'fine-tune whose AdamW state does not fit; the update decays after the step, as bitsandbytes does',
    ),
    optimizer_impl: oneOf(
      'torch.optim',
      OPTIMIZER_IMPLS,
      'The library verl imports optim.optimizer from: torch.optim (AdamW) or bitsandbytes.optim (AdamW8bit)',
    ),
  };
}

/** optim.optimizer / optim.optimizer_impl values: verl builds `getattr(import_module(impl), optimizer)`. */
export const OPTIMIZERS = ['AdamW', 'AdamW8bit'] as const;
export const OPTIMIZER_IMPLS = ['torch.optim', 'bitsandbytes.optim'] as const;

/** trainer.logger values: the sinks this engine writes, and verl's service loggers it accepts and skips. */
export const WRITTEN_LOGGERS = ['console', 'file', 'tensorboard'] as const;
export const SERVICE_LOGGERS = ['wandb', 'mlflow', 'swanlab', 'vemlp_wandb', 'clearml'] as const;
const LOGGERS = [...WRITTEN_LOGGERS, ...SERVICE_LOGGERS];

/** algorithm.adv_estimator values (ppo/algorithm/advantage-estimators.ts dispatches each to its kernel). */
export { ADV_ESTIMATORS, SUM_PI_SQUARED_ESTIMATORS, type AdvEstimator };

/** algorithm.pf_ppo.reweight_method values (ppo/algorithm/pf-ppo.ts weighs each). */
export const PF_PPO_REWEIGHT_METHODS = ['pow', 'max_min', 'max_random'] as const;
export type PfPpoReweightMethod = (typeof PF_PPO_REWEIGHT_METHODS)[number];

/** actor_rollout_ref.rollout.dtype values (verl's RolloutConfig.dtype, torch dtype names). */
export const ROLLOUT_DTYPES = ['bfloat16', 'float16', 'float32'] as const;
export type RolloutDtype = (typeof ROLLOUT_DTYPES)[number];

/** verl's fsdp_config.model_dtype spellings (its PrecisionType). */
export const MODEL_DTYPES = ['fp32', 'float32', 'bf16', 'bfloat16', 'fp16', 'float16'] as const;
export type ModelDtype = (typeof MODEL_DTYPES)[number];
/** A frozen model's stored dtype; null: its checkpoint's. */
const modelDtype = (help: string) => new Key<ModelDtype | null>('string', null, help, true, null, MODEL_DTYPES);
const FROZEN_DTYPE_HELP =
  'fp32, bf16 or fp16 (norms, biases and score heads stay float32; all arithmetic is float32); null: the ' +
  "checkpoint's torch_dtype, so a bf16 model's frozen copy is bf16 at no loss (its weights are the checkpoint's own " +
  "bf16 values). verl's generated config writes fp32";
const TRAINED_DTYPE_HELP =
  'accepted as verl spells it; a trained model keeps float32 master weights whatever this says (bf16/fp16 prints one ' +
  'line: set fsdp_config.dtype for half-precision compute)';
/** fsdp_config.dtype: a trained model's compute dtype (verl's FSDP MixedPrecision param_dtype). */
const computeDtype = (model: string) =>
  oneOf(
    'float32',
    MODEL_DTYPES,
    `Compute dtype of the ${model} while it trains (verl's fsdp_config.dtype; older configs' ` +
      'fsdp_config.mixed_precision.param_dtype): bfloat16 or float16 run its forward and backward on a half-precision ' +
      'copy of its weight matrices, remade from the float32 master weights after each optimizer step, with the ' +
      'residual stream rounded to it between layers (gradient checkpointing keeps those inputs in it: half their ' +
      'bytes); gradients accumulate and AdamW runs in float32 (reduce/buffer dtype fp32). The copy adds half the ' +
      'parameter bytes. For weights that all train (a LoRA base computes in its stored dtype: model_dtype). ' +
      "verl's default is bfloat16; float32 here: on lavapipe bf16 compute ended the built-in job where float32 does " +
      'and made its step slower on both device classes (docs/models-and-memory.md)',
  );
const ACTOR_DTYPE_HELP =
  `with LoRA (lora_rank > 0), the frozen base's matrices (also the reference's): ${FROZEN_DTYPE_HELP} — half the ` +
  `bytes of fp32 for the largest resident tensor (model.load_in_4bit / load_in_8bit: NF4 or int8 layer projections ` +
  `instead); without ` +
  `LoRA, ${TRAINED_DTYPE_HELP}`;

/** verl's fsdp_config.optimizer_offload for a trained model's AdamW state. */
const optimizerOffload = (model: 'actor' | 'critic') =>
  bool(
    false,
    `Keep the ${model}'s AdamW moments (float32, or optim.optimizer=AdamW8bit's codes and scales) in host memory; ` +
      'each update streams them through one 32 MiB device staging buffer, the same kernels in the same order, so ' +
      "the weights are the resident optimizer's bit for bit. Device memory drops by the moments (8 bytes a weight, " +
      'AdamW8bit 2.03) for one upload and read-back of them per optimizer step. Checkpoints are the same files ' +
      'either way (docs/models-and-memory.md)',
  );

/** PEFT's LoraConfig keys besides the rank, the same for the actor (actor_rollout_ref.model) and the critic. */
function loraKeys(model: 'actor' | 'critic') {
  const critic = model === 'critic';
  return {
    lora_alpha: float(
      16,
      `${critic ? 'Critic ' : ''}LoRA α: adapters add (lora_alpha / lora_rank)·B·A to each targeted weight` +
        (critic ? '' : " (verl's tests pass 0 with rank 0)"),
      nonNegative,
    ),
    target_modules: new Key<string[]>(
      'strings',
      [ALL_LINEAR],
      `Linear modules${critic ? ' of the critic' : ''} that get adapters: all-linear, or a list of ` +
        LORA_MODULES.join(', '),
      false,
      null,
      [ALL_LINEAR, ...LORA_MODULES],
    ),
    // Names are checked when LoRA is on (resolveTargetModules): verl's tests pass DONT_EXCLUDE with rank 0.
    exclude_modules: new Key<string[] | null>(
      'strings',
      null,
      `Modules of ${critic ? "the critic's " : ''}target_modules left without adapters (${LORA_MODULES.join(', ')})`,
      true,
    ),
  };
}

/** distillation.distillation_loss.loss_mode values (verl's register_distillation_loss names at 1dda039b). */
export const DISTILLATION_LOSS_MODES = ['kl', 'k1', 'abs', 'mse', 'k2', 'low_var_kl', 'k3', 'forward_kl_topk'] as const;

/** One of distillation.teacher_models. */
export interface TeacherModel {
  key: string | null;
  model_path: string | null;
}

const KL_ESTIMATOR_HELP = 'kl|k1, abs, mse|k2, low_var_kl|k3; a trailing + keeps the value and takes the k2 gradient';

/** Every key, its default and its meaning. The shape of this object is the shape of PpoConfig. */
const SCHEMA = {
  data: {
    tokenizer: optStr(null, "Tokenizer directory; null: the actor model's own"),
    train_files: new Key<string | string[] | null>(
      'files',
      null,
      "Training prompts: Parquet or JSONL file(s) in verl's RL schema; null: the built-in arithmetic task",
      true,
    ),
    val_files: new Key<string | string[] | null>(
      'files',
      null,
      "Validation prompts, same schema; null: the built-in task's held-out set",
      true,
    ),
    prompt_key: str('prompt', "Column holding each prompt's chat messages"),
    reward_fn_key: str('data_source', 'Column that selects the rule reward'),
    max_prompt_length: int(512, 'Longest prompt in tokens, chat template included', positive),
    max_response_length: int(
      512,
      'Longest response in tokens (with do_search: all turns and observations together)',
      positive,
    ),
    max_obs_length: int(512, 'do_search: observation tokens kept per search (longer ones are cut)', positive),
    builtin_task: oneOf(
      'arithmetic',
      ['arithmetic', 'search_qa'],
      'Task of the built-in run (train_files null): arithmetic, or search_qa (invented facts found only by ' +
        'searching; needs do_search)',
    ),
    train_max_samples: int(-1, 'Use only the first N training prompts; -1: all (Search-R1: data.train_data_num)'),
    val_max_samples: int(-1, 'Use only the first N validation prompts; -1: all (Search-R1: data.val_data_num)'),
    train_batch_size: int(1024, 'Prompts per training step (each sampled rollout.n times)', positive),
    gen_batch_size: optInt(
      null,
      'DAPO dynamic sampling (algorithm.filter_groups.enable): prompts per generation batch; null: ' +
        'data.train_batch_size',
      positive,
    ),
    val_batch_size: optInt(
      null,
      "Accepted as verl spells it; validation decodes the whole set through the rollout's slots (memory bounded by " +
        'rollout.gpu_memory_utilization), so batching would change nothing',
      positive,
    ),
    shuffle: bool(true, 'Reshuffle the training prompts every epoch'),
    // Typed number: a null (verl's default, "unseeded") becomes trainer.seed in deriveDefaults before anyone reads it.
    seed: new Key<number>(
      'int',
      1,
      "Seed of the per-epoch shuffle; null (verl's generated config): trainer.seed, so runs stay reproducible",
      true,
    ),
    filter_overlong_prompts: bool(
      false,
      'Drop prompts longer than max_prompt_length instead of applying data.truncation',
    ),
    truncation: oneOf(
      'error',
      ['error', 'left', 'right', 'middle'],
      'Overlong prompts: fail, keep the last (left) / first (right) tokens, or both ends (middle)',
    ),
  },
  actor_rollout_ref: {
    model: {
      path: optStr(
        null,
        'Hugging Face directory of the actor (the reference is its frozen copy); null: the built-in tiny Qwen3-style ' +
          'model',
      ),
      custom_chat_template: optStr(
        null,
        "Jinja chat template replacing the tokenizer's (saved with checkpoints); '{{ messages[-1].content }}' feeds " +
          'a base model the prompt as plain text',
      ),
      enable_gradient_checkpointing: bool(
        true,
        "Activation recomputation: keep only each layer's input in the forward, recompute the layer in backward " +
          '(same gradients, about a third more compute)',
      ),
      lora_rank: int(
        0,
        'LoRA rank r (PEFT): > 0 trains only adapters on target_modules, the base model frozen; the reference is the ' +
          'base model with adapters off (no second copy)',
        nonNegative,
      ),
      ...loraKeys('actor'),
      lora_adapter_path: optStr(
        null,
        'A PEFT adapter directory (adapter_config.json + adapter_model.safetensors) to start from; its r, lora_alpha ' +
          'and target_modules apply',
      ),
      load_in_4bit: bool(
        false,
        "QLoRA (TRL's and OpenRLHF's key): the frozen LoRA base's layer projections quantized at load to NF4 as " +
          'bitsandbytes does (blocks of 64, a float32 absmax each: 4.5 bits per weight; ~4.13 with ' +
          "use_bnb_nested_quant), dequantized inside the matmuls; embedding, LM head and norms keep the checkpoint's " +
          'dtype, adapters are float32, the reference is the quantized base with adapters off. Needs lora_rank > 0 ' +
          '(or lora_adapter_path)',
      ),
      use_bnb_nested_quant: bool(
        false,
        "TRL's key for HF's bnb_4bit_use_double_quant (OpenRLHF's load_in_4bit always sets it): with load_in_4bit, " +
          "the block scales are themselves quantized as bitsandbytes' compress_statistics does (minus their mean, " +
          'blocks of 256 in the 8-bit dynamic map): 0.129 instead of 0.5 bits per weight for the scales, ~4.13 bits ' +
          "in all; each scale moves by at most 0.7% of its 256-block's spread, far below NF4's own step. Needs every " +
          'fused q/k/v, gate/up part but the last to be whole 16,384-weight blocks (all released Qwen/Llama shapes)',
      ),
      load_in_8bit: bool(
        false,
        "LLM.int8's weight format (TRL's key; HF's BitsAndBytesConfig(load_in_8bit=True)): the frozen LoRA base's " +
          "layer projections rounded at load to int8 per row (each row scaled by 127 / its absmax, as bitsandbytes' " +
          'Int8Params stores them: 8 bits plus 32 per row), dequantized inside the matmuls; activations stay float32 ' +
          '(no int8 activations, no outlier threshold: llm_int8_threshold has nothing to split). Closer to the ' +
          'checkpoint than NF4 at about twice its bytes. Needs lora_rank > 0 (or lora_adapter_path)',
      ),
      lora_save_merged: bool(
        false,
        'LoRA: checkpoints also hold actor/lora_merged/, the model with W + (lora_alpha / r)·B·A merged in (a plain ' +
          'HF directory, no PEFT needed)',
      ),
      lora: {
        merge: bool(
          false,
          "verl: merge the adapters into the weights before each sync to the rollout; this engine's decoder already " +
            'generates with W + (α/r)·B·A, so true changes nothing in-process (refused with rollout.server_urls, which ' +
            "load the adapter). verl's other nested lora.* keys set the flat ones when lora.rank > 0",
        ),
      },
    },
    actor: {
      ppo_mini_batch_size: int(256, 'Prompts per optimizer step (× rollout.n sequences)', positive),
      ppo_micro_batch_size: optInt(
        null,
        'Deprecated spelling of ppo_micro_batch_size_per_gpu (one device here)',
        positive,
      ),
      ppo_micro_batch_size_per_gpu: optInt(
        null,
        'Sequences per forward/backward; smaller than the mini-batch accumulates gradients; null: the whole mini-batch',
        positive,
      ),
      use_dynamic_bsz: bool(
        false,
        'Form micro-batches by a token budget (ppo_max_token_len_per_gpu) instead of ppo_micro_batch_size_per_gpu: ' +
          'similar lengths together, each padded only to its own longest sequence',
      ),
      ppo_max_token_len_per_gpu: int(
        16384,
        'use_dynamic_bsz: tokens per micro-batch, padding included (rows × (longest prompt + longest response))',
        positive,
      ),
      ppo_epochs: int(1, 'Passes over each rollout batch', positive),
      shuffle: bool(false, 'Shuffle sequences across mini-batches every PPO epoch'),
      grad_clip: float(1.0, 'Clip the global gradient norm to this', positive),
      clip_ratio: float(
        0.2,
        'PPO clip ε as verl keeps it; the two sides are set by clip_ratio_low / clip_ratio_high',
        openUnitInterval,
      ),
      clip_ratio_low: float(
        0.2,
        "Lower clip: ratio ≥ 1 − clip_ratio_low; 1 or more leaves the ratio unbounded below (verl's CISPO example " +
          'uses 10)',
        positive,
      ),
      clip_ratio_high: float(0.2, "Upper clip: ratio ≤ 1 + clip_ratio_high (DAPO's clip-higher raises it)", positive),
      clip_ratio_c: float(3.0, 'Dual-clip PPO: bound of the loss for negative advantages, > 1', {
        what: 'greater than 1',
        test: (v) => v > 1,
      }),
      loss_agg_mode: oneOf('token-mean', LOSS_AGG_MODES, 'How token losses become one loss'),
      loss_scale_factor: optInt(
        null,
        'seq-mean-token-sum-norm: the constant that divides the per-sequence mean of token sums; null: the longest ' +
          "response of the micro-batch (verl's padded width)",
        positive,
      ),
      entropy_coeff: float(0, 'Entropy bonus coefficient'),
      use_kl_loss: bool(false, 'Add a KL-to-reference loss term (as GRPO does)'),
      kl_loss_coef: float(0.001, 'Coefficient of the KL loss term', nonNegative),
      kl_loss_type: str('low_var_kl', `KL estimator of the loss term: ${KL_ESTIMATOR_HELP}`),
      tau_pos: float(1.0, 'sapo: gate temperature for tokens with A > 0', positive),
      tau_neg: float(1.05, 'sapo: gate temperature for tokens with A ≤ 0', positive),
      calculate_sum_pi_squared: bool(
        false,
        'Σ_v π_v² per response token from the old-log-prob forward (recomputed for it when ' +
          'rollout.calculate_log_probs is off, as verl always does): algorithm.adv_estimator=optimal_token_baseline ' +
          "and tir_optimal_token_baseline need it, and it adds verl's variance_proxy/* metrics; costs one more " +
          'statistics pass over the logits of that forward',
      ),
      sum_pi_squared_checkpointing: bool(
        false,
        "verl's activation checkpointing of the Σπ² computation; accepted, no effect here: the fused LM head " +
          'computes Σπ² chunk by chunk without keeping per-vocabulary activations, and only in the no-gradient ' +
          'old-log-prob forward',
      ),
      policy_loss: {
        loss_mode: oneOf(
          'vanilla',
          POLICY_LOSS_MODES,
          `Policy loss (verl 1dda039b's, see docs/training.md): ${policyLossModesHelp()}`,
        ),
        clip_cov_ratio: float(0.0002, 'clip_cov: fraction of the valid tokens whose loss is cut', positive),
        clip_cov_lb: float(1.0, 'clip_cov: only tokens with covariance above this are cut'),
        clip_cov_ub: float(5.0, 'clip_cov: only tokens with covariance below this are cut'),
        kl_cov_ratio: float(
          0.0002,
          'kl_cov: fraction of the valid tokens (largest covariance) that get the |log-ratio| penalty',
          positive,
        ),
        ppo_kl_coef: float(0.1, 'kl_cov: coefficient of that penalty', nonNegative),
        dro_beta: optFloat(null, 'dro: β of the penalty β/2·(log π − log π_old)²; required (> 0) with dro', positive),
      },
      optim: optimizerKeys(1e-6),
      fsdp_config: {
        model_dtype: modelDtype(`Stored dtype of the actor's weights: ${ACTOR_DTYPE_HELP}`),
        dtype: computeDtype('actor'),
        optimizer_offload: optimizerOffload('actor'),
      },
    },
    rollout: {
      n: int(1, 'Responses sampled per prompt (> 1 for GRPO, RLOO, …)', positive),
      name: oneOf(
        'hf',
        ['hf', 'sglang', 'vllm'],
        "Where responses are generated: hf, in-process on this engine's decoder; sglang or vllm with server_urls, on " +
          "those inference servers (SGLang, vLLM, or this engine's `node serve.js`, which speaks SGLang's protocol), " +
          "synced from rollout_weights_dir each step (docs/rollout-servers.md); without server_urls (as verl's " +
          'launch scripts pass name=vllm), in-process too',
      ),
      mode: oneOf(
        'sync',
        ['sync', 'async'],
        "With servers: sync generates each step's batch with that step's weights; async (verl's one-step-off-policy) " +
          "generates step k+1's batch with the weights of step k while the trainer updates, one step stale (the old " +
          'log-probs are recomputed; rollout_correction weighs the gap)',
      ),
      server_urls: new Key<string[]>(
        'strings',
        [],
        'Rollout servers for name=sglang|vllm, as [http://host:port,…]; prompts are spread over them and a failing ' +
          'one leaves the pool',
      ),
      server_timeout_s: float(
        600,
        "Seconds one request to a rollout server may take (a whole generation of one prompt's n samples, or one " +
          'weight load)',
        positive,
      ),
      server_max_retries: int(
        2,
        'Times one prompt is retried on another rollout server after its server failed, before the step stops',
        nonNegative,
      ),
      server_fingerprint_tol: float(
        0.1,
        'After each weight load, largest |server − trainer| log-prob of any token of a fixed probe sequence; more ' +
          'stops the run (a server of another model, or stale weights)',
        positive,
      ),
      dtype: oneOf(
        'float32',
        ROLLOUT_DTYPES,
        'Precision of in-process generation (name=hf): bfloat16 or float16 decode with a half-precision copy of the ' +
          "actor's weights (remade after each actor update; a LoRA base stored in bf16/NF4/int8 is decoded as stored, " +
          'adapters stay float32) and a half-precision KV cache: half the cache bytes, so up to about twice the ' +
          'sequences decode at once. The training forward stays float32: old log-probs are recomputed and rollout_corr/* reports the ' +
          "drift, as with rollout servers. verl's default is bfloat16 (vLLM's serving dtype); float32 here keeps " +
          'rollout and training log-probs identical (docs/models-and-memory.md)',
      ),
      temperature: float(1.0, 'Sampling temperature', nonNegative),
      top_k: int(-1, 'Keep the k most likely tokens; -1 or 0: all', { what: '≥ -1', test: (v) => v >= -1 }),
      top_p: float(1, 'Nucleus sampling mass', probability),
      do_sample: bool(true, 'Sample; false: greedy'),
      ignore_eos: bool(
        false,
        'Generation goes on after an EOS (vLLM/SGLang ignore_eos, sent to rollout servers too): responses run to ' +
          'max_response_length; single-turn rollouts only',
      ),
      log_prob_micro_batch_size_per_gpu: optInt(
        null,
        'Sequences per forward when recomputing old log-probs (calculate_log_probs); null: all at once (deprecated ' +
          'spelling: log_prob_micro_batch_size)',
        positive,
      ),
      calculate_log_probs: bool(
        true,
        "Keep the sampler's own log-probs as rollout log-probs and recompute old log-probs with the training forward " +
          '(one more actor forward per step: verl 1dda039b turned this on by default), logging rollout_corr/* drift ' +
          'metrics (kl, k3_kl, training_ppl, rollout_ppl, log_ppl_diff, chi2_token, …); false: old log-probs are the ' +
          "sampler's, one forward fewer",
      ),
      gpu_memory_utilization: float(
        0.5,
        'Fraction of the device memory generation may take (KV caches, activations, logits), at most: the memory ' +
          "plan gives it less where the run's peak would otherwise exceed the device. WebGPU reports no " +
          'memory size: ' +
          "the device's is looked up by adapter name (engine/device-memory.ts), is system RAM for a software adapter " +
          'and a share of it for unified memory, ' +
          'and is set with the environment variable WEBGPU_DEVICE_MEMORY=80GiB (an engine knob, not a config key: ' +
          "verl reads it from CUDA); the run's memory plan prints which",
        { what: 'in (0, 1]', test: (v) => v > 0 && v <= 1 },
      ),
      free_cache_engine: bool(
        true,
        "verl's sleep mode: after each rollout (and validation's generation) free its decoders (KV caches, prefill " +
          "activations) and a rollout.dtype half copy of the actor, and before it the forwards' and updates' work " +
          "buffers, so the rollout's and the updates' memory do not add up and the rollout keeps its whole " +
          "gpu_memory_utilization share where the rest fits (a frozen LoRA base's half copy is kept where the memory " +
          'plan says it fits); false: keep both allocated from step to step',
      ),
      log_prob_use_dynamic_bsz: bool(
        '${actor_rollout_ref.actor.use_dynamic_bsz}',
        "Log-prob forwards by a token budget (old log-probs with calculate_log_probs; the reference's default)",
      ),
      log_prob_max_token_len_per_gpu: int(
        '${actor_rollout_ref.actor.ppo_max_token_len_per_gpu}',
        'log_prob_use_dynamic_bsz: tokens per forward, padding included',
        positive,
      ),
      val_kwargs: {
        n: int(1, 'Responses per validation prompt', positive),
        temperature: float(0, 'Validation sampling temperature', nonNegative),
        top_k: int(-1, 'Validation top-k; -1 or 0: all', { what: '≥ -1', test: (v) => v >= -1 }),
        top_p: float(1.0, 'Validation nucleus mass', probability),
        do_sample: bool(false, 'Sample during validation; false: greedy'),
      },
      multi_turn: {
        enable: bool(
          false,
          "verl's tool agent loop: the model calls the tools of tool_config_path (hermes " +
            '<tool_call>{json}</tool_call>), their answers come back as `tool` messages masked out of the loss ' +
            '(docs/search-r1-and-agents.md)',
        ),
        tool_config_path: optStr(
          null,
          "verl's tool config YAML (tools: - class_name, config, tool_schema); null: no tools",
        ),
        max_assistant_turns: optInt(
          null,
          'Model turns per response at most; null: data.max_response_length // 3 (bounds the decode cache: set it)',
          positive,
        ),
        max_user_turns: optInt(
          null,
          'Tool-response turns per response at most; null: no limit besides max_assistant_turns',
          positive,
        ),
        max_parallel_calls: int(
          1,
          'Tool calls executed per model turn (the first ones; the others are dropped as verl does)',
          positive,
        ),
        max_tool_response_length: int(
          256,
          "Characters of a tool's text kept (verl cuts characters, not tokens)",
          positive,
        ),
        tool_response_truncate_side: oneOf(
          'middle',
          ['left', 'middle', 'right'],
          'Which part of an overlong tool response is kept: left (the start), right (the end), middle (both ends)',
        ),
        format: oneOf(
          'hermes',
          ['hermes', 'qwen'],
          'Tool-call format the model writes: hermes (<tool_call>{"name", "arguments"}</tool_call>, Qwen\'s); qwen ' +
            "(verl's Search-R1 example config) is the same format and is read as hermes",
        ),
      },
      agent: {
        default_agent_loop: oneOf(
          'single_turn_agent',
          ['single_turn_agent', 'tool_agent'],
          "verl's agent loop for every sample: single_turn_agent, one response; tool_agent, the tool loop of " +
            'multi_turn (turns multi_turn.enable on; a per-sample agent_name column is not read)',
        ),
      },
    },
    ref: {
      log_prob_micro_batch_size_per_gpu: optInt(
        null,
        'Sequences per forward of the reference model; null: all at once (deprecated spelling: ' +
          'log_prob_micro_batch_size)',
        positive,
      ),
      log_prob_use_dynamic_bsz: bool(
        '${actor_rollout_ref.rollout.log_prob_use_dynamic_bsz}',
        'Reference forwards by a token budget instead of log_prob_micro_batch_size_per_gpu',
      ),
      log_prob_max_token_len_per_gpu: int(
        '${actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu}',
        'log_prob_use_dynamic_bsz: tokens per reference forward, padding included',
        positive,
      ),
      load_in_4bit: bool(
        false,
        'The separate reference (no LoRA, a KL term on) stored as actor_rollout_ref.model.load_in_4bit stores a LoRA ' +
          "base: layer projections in NF4 (4.5 bits per weight), embedding and LM head in the checkpoint's dtype, " +
          'norms float32 (model_dtype no longer applies). Its log-probs move by NF4 rounding (a few hundredths of a ' +
          'nat on small models), so the KL is not 0 at the first step. Needs a KL term; under LoRA the reference is ' +
          'the base: set actor_rollout_ref.model.load_in_4bit instead',
      ),
      use_bnb_nested_quant: bool(
        false,
        "With load_in_4bit, the reference's NF4 block scales double-quantized as actor_rollout_ref.model." +
          'use_bnb_nested_quant does for a LoRA base (~4.13 bits per weight instead of 4.5; same block-shape need)',
      ),
      load_in_8bit: bool(
        false,
        "The separate reference's layer projections in int8 per row, as actor_rollout_ref.model.load_in_8bit stores " +
          'a LoRA base (8 bits plus 32 per row; activations float32); as load_in_4bit otherwise',
      ),
      fsdp_config: {
        model_dtype: modelDtype(`Stored dtype of the reference model's matrices: ${FROZEN_DTYPE_HELP}`),
      },
    },
  },
  critic: {
    model: {
      path: optStr(
        '${actor_rollout_ref.model.path}',
        'Hugging Face directory the critic starts from (a value head is added when it has none)',
      ),
      enable_gradient_checkpointing: bool(
        true,
        'Critic activation recomputation in backward (same gradients, about a third more compute)',
      ),
      lora_rank: int(
        0,
        "Critic LoRA rank r (PEFT): > 0 trains adapters on target_modules and the value head `score` (PEFT's " +
          'modules_to_save), the base critic frozen in its checkpoint dtype (or fsdp_config.model_dtype)',
        nonNegative,
      ),
      ...loraKeys('critic'),
      fsdp_config: {
        model_dtype: modelDtype(
          `Stored dtype of the critic's matrices when critic.freeze=true or under critic LoRA (the frozen base): ` +
            `${FROZEN_DTYPE_HELP}; a fully trained critic: ${TRAINED_DTYPE_HELP}`,
        ),
        dtype: computeDtype('critic'),
        optimizer_offload: optimizerOffload('critic'),
      },
    },
    optim: optimizerKeys(1e-5),
    ppo_mini_batch_size: int(
      '${actor_rollout_ref.actor.ppo_mini_batch_size}',
      'Prompts per critic optimizer step (× rollout.n sequences)',
      positive,
    ),
    ppo_micro_batch_size: optInt(
      null,
      'Deprecated spelling of ppo_micro_batch_size_per_gpu (one device here)',
      positive,
    ),
    ppo_micro_batch_size_per_gpu: optInt(
      null,
      'Sequences per critic forward/backward; null: the whole mini-batch',
      positive,
    ),
    forward_micro_batch_size_per_gpu: optInt(
      '${critic.ppo_micro_batch_size_per_gpu}',
      'Sequences per critic forward when computing values; null: all at once',
      positive,
    ),
    use_dynamic_bsz: bool(
      '${actor_rollout_ref.actor.use_dynamic_bsz}',
      'Critic micro-batches and value forwards by a token budget',
    ),
    ppo_max_token_len_per_gpu: int(32768, 'use_dynamic_bsz: tokens per critic micro-batch, padding included', positive),
    forward_max_token_len_per_gpu: int(
      '${critic.ppo_max_token_len_per_gpu}',
      'use_dynamic_bsz: tokens per value forward, padding included',
      positive,
    ),
    ppo_epochs: int('${actor_rollout_ref.actor.ppo_epochs}', 'Critic passes over each rollout batch', positive),
    shuffle: bool('${actor_rollout_ref.actor.shuffle}', 'Shuffle sequences across critic mini-batches'),
    grad_clip: float(1.0, "Clip the critic's global gradient norm to this", positive),
    cliprange_value: float(0.5, 'Clip new values to old values ± this in the value loss', positive),
    loss_agg_mode: oneOf(
      '${actor_rollout_ref.actor.loss_agg_mode}',
      LOSS_AGG_MODES,
      'How token value losses become one loss',
    ),
    loss_scale_factor: optInt(
      null,
      "seq-mean-token-sum-norm: the value loss's constant divisor; null: the longest response of the micro-batch",
      positive,
    ),
    freeze: bool(false, 'Compute values but never update the critic'),
  },
  reward_model: {
    enable: bool(false, 'Score responses with a neural reward model instead of the rule reward'),
    model: {
      path: optStr(null, 'Hugging Face *ForSequenceClassification directory'),
      load_in_4bit: bool(
        false,
        "The reward model's layer projections in NF4, as actor_rollout_ref.model.load_in_4bit stores a LoRA base " +
          "(4.5 bits per weight; the embedding in the checkpoint's dtype, norms and the score head float32; " +
          'model_dtype no longer applies); needs reward_model.enable. verl HEAD spelling: ' +
          'reward.reward_model.load_in_4bit',
      ),
      use_bnb_nested_quant: bool(
        false,
        "With load_in_4bit, the reward model's NF4 block scales double-quantized as actor_rollout_ref.model." +
          'use_bnb_nested_quant does for a LoRA base (~4.13 bits per weight instead of 4.5; same block-shape need); ' +
          'verl HEAD spelling: reward.reward_model.use_bnb_nested_quant',
      ),
      load_in_8bit: bool(
        false,
        "The reward model's layer projections in int8 per row (8 bits plus 32 per row; the score head float32); " +
          'verl HEAD spelling: reward.reward_model.load_in_8bit',
      ),
      fsdp_config: {
        model_dtype: modelDtype(
          `Stored dtype of the reward model's matrices (verl loads reward models in bf16): ${FROZEN_DTYPE_HELP}`,
        ),
      },
    },
    micro_batch_size_per_gpu: optInt(
      null,
      'Sequences per reward-model forward; null: all at once (deprecated spelling: micro_batch_size)',
      positive,
    ),
    reward_manager: oneOf(
      'naive',
      ['naive', 'dapo', 'gdpo'],
      'naive: the rule (or custom) score; dapo: the same plus the overlong-buffer length penalty; gdpo: the same, ' +
        'extra_info.experiment_name = trainer.experiment_name (the rlla reward picks its chat template by it)',
    ),
    reward_kwargs: {
      overlong_buffer_cfg: {
        enable: bool(false, 'dapo: penalise responses within len tokens of max_response_length'),
        len: int(
          0,
          'dapo: the buffer in tokens before max_response_length where the penalty grows linearly',
          nonNegative,
        ),
        penalty_factor: float(
          0,
          'dapo: the penalty at max_response_length (reward − penalty_factor × overshoot / len)',
          nonNegative,
        ),
        log: bool(
          false,
          'dapo: accepted; the penalty shows in critic/score/* and critic/rewards/* (no separate overlong_reward ' +
            'series yet)',
        ),
      },
      max_resp_len: optInt(
        null,
        'dapo: the response length the overlong buffer ends at; null: data.max_response_length',
        positive,
      ),
    },
  },
  custom_reward_function: {
    path: optStr(
      null,
      'JS/TS module with a reward function (data_source, solution_str, ground_truth, extra_info) → number | {score, …}',
    ),
    name: str('compute_score', 'Name of the function the module exports'),
    timeout: float(
      300,
      "Seconds one reward call (or the module's import) may take; past it the run stops, naming the call (a reward " +
        'that never returns)',
      positive,
    ),
  },
  algorithm: {
    gamma: float(1.0, 'Discount factor', unitInterval),
    lam: float(1.0, 'GAE λ', unitInterval),
    adv_estimator: oneOf<AdvEstimator>(
      'gae',
      ADV_ESTIMATORS,
      `Advantage estimator (verl 1dda039b's; only gae uses a critic): ${advEstimatorsHelp()}`,
    ),
    norm_adv_by_std_in_grpo: bool(true, "GRPO: divide by the group's standard deviation (false: Dr. GRPO)"),
    gdpo_reward_keys: new Key<string[] | null>(
      'strings',
      null,
      "gdpo: the reward function's result keys (e.g. [format_reward, accuracy_reward]) each normalised within its " +
        'group before the weighted sum; null: token_level_rewards alone',
      true,
    ),
    gdpo_reward_weights: new Key<number[] | null>(
      'floats',
      null,
      'gdpo: one weight per gdpo_reward_keys entry; null: ones',
      true,
    ),
    use_kl_in_reward: bool(false, 'Subtract β·KL(actor‖reference) from the token rewards'),
    kl_penalty: str('kl', `KL estimator of the in-reward penalty: ${KL_ESTIMATOR_HELP}`),
    kl_ctrl: {
      type: oneOf('fixed', ['fixed', 'adaptive'], 'KL coefficient controller'),
      kl_coef: float(0.001, 'Initial β', nonNegative),
      horizon: int(10000, 'adaptive: steps over which β adapts', positive),
      target_kl: float(0.1, 'adaptive: the KL β steers towards', positive),
    },
    use_pf_ppo: bool(
      false,
      'Preference feedback PPO: with adv_estimator=gae, the batch is resampled with replacement after the ' +
        'advantages, each sequence drawn in proportion to a weight of its score (algorithm.pf_ppo); other estimators ' +
        'ignore it, as in verl',
    ),
    pf_ppo: {
      reweight_method: oneOf(
        'pow',
        PF_PPO_REWEIGHT_METHODS,
        "Method for reweighting samples: pow |score|^weight_pow, max_min 1 at the batch's highest and lowest score " +
          'and 0 elsewhere, max_random 0.4 at the highest and 0.1 elsewhere (each + 1e-8)',
      ),
      weight_pow: float(2.0, 'Power used for weight scaling in the pow method'),
    },
    filter_groups: {
      enable: bool(
        false,
        'DAPO dynamic sampling: drop prompt groups whose samples all have the same metric value, and generate ' +
          'data.gen_batch_size batches until data.train_batch_size prompts are kept',
      ),
      metric: optStr(
        null,
        "Value compared within a group: acc or score (the reward's field of that name, else the score), seq_reward / " +
          'seq_final_reward (the sequence score), or any field the reward returns; null (verl 1dda039b): none, so ' +
          'enable=true needs it',
      ),
      max_num_gen_batches: int(
        0,
        'Generation batches per step at most before the run stops; 0: unlimited',
        nonNegative,
      ),
    },
    reward_mask_ratio: float(
      0,
      'Fraction of trajectories whose reward is zeroed (seeded draw per trajectory)',
      unitInterval,
    ),
    rollout_correction: {
      rollout_is: new Key<'token' | 'sequence' | null>(
        'string',
        null,
        'Importance weights exp(old − rollout log-prob) on the policy loss, per token or per sequence (the product), ' +
          'truncated at rollout_is_threshold; needs actor_rollout_ref.rollout.calculate_log_probs=true unless ' +
          'bypass_mode; null: none',
        true,
        null,
        ['token', 'sequence'],
      ),
      rollout_is_threshold: new Key<number | string>(
        'numberOrString',
        2.0,
        'rollout_is: a number (TIS: weights above it truncated to it) or "LOWER_UPPER" (IcePop: weights outside ' +
          '[LOWER, UPPER] zeroed), verl 1dda039b',
      ),
      rollout_is_batch_normalize: bool(false, 'rollout_is: divide the truncated weights by their batch mean'),
      rollout_rs: optStr(
        null,
        'Rejection sampling, comma-separated options that must all pass (verl main): token_k1|k2|k3 per token, ' +
          'seq_sum_k1|k2|k3, seq_mean_k1|k2|k3, seq_max_k2|k3 per sequence, of k1 = −lr, k2 = lr²/2, k3 = e^lr − 1 − ' +
          'lr with lr = old − rollout log-prob; rejected tokens leave the response mask; needs ' +
          'actor_rollout_ref.rollout.calculate_log_probs=true unless bypass_mode; null: none',
      ),
      rollout_rs_threshold: optStr(
        null,
        'rollout_rs: one threshold shared by every option or one per option, comma-separated; a k1 option takes ' +
          'LOWER_UPPER ratio bounds (UPPER alone: lower = 1/UPPER), k2/k3 an upper bound (required with rollout_rs)',
      ),
      bypass_mode: bool(
        false,
        "Use the rollout's log-probs as old log-probs, no recomputation, even with calculate_log_probs; rollout_is " +
          "and rollout_rs then weigh and reject inside each micro-batch's policy loss against the current policy " +
          "(verl's compute_policy_loss_bypass_mode), and loss_type replaces actor.policy_loss.loss_mode",
      ),
      loss_type: oneOf(
        'ppo_clip',
        ['ppo_clip', 'reinforce'],
        'bypass_mode: the policy loss — ppo_clip (vanilla clipped PPO with ratio π_θ/π_rollout; IS weights only ' +
          "measured) or reinforce (−w·A·log π_θ with rollout_is's truncated weight w, none without rollout_is)",
      ),
    },
  },
  distillation: {
    enabled: bool(
      false,
      "On-policy distillation (verl's examples/on_policy_distillation_trainer): frozen teachers, in their " +
        "checkpoint's dtype and sharing the student's tokenizer, score the student's rollouts and a per-token " +
        'distillation loss pulls the student to them (docs/training.md, On-policy distillation)',
    ),
    teacher_key: str(
      'data_source',
      'Column whose value picks the teacher of a sample (its teacher_models.*.key): data_source, or an extra_info ' +
        'field of that name; unread with a single teacher',
    ),
    teacher_models: new Key<Record<string, TeacherModel>>(
      'map',
      { teacher_model: { key: null, model_path: null } },
      'Named teachers, each <name>.key (the teacher_key value it serves; null with a single teacher) and ' +
        "<name>.model_path (a Hugging Face directory sharing the student's tokenizer); add one with " +
        '+distillation.teacher_models.NAME.model_path=…',
      false,
      null,
      null,
      {
        key: optStr(null, 'The teacher_key value whose samples this teacher scores; null: every sample'),
        model_path: optStr(null, 'Hugging Face directory of the teacher'),
      },
    ),
    distillation_loss: {
      loss_mode: oneOf(
        'k3',
        DISTILLATION_LOSS_MODES,
        'Per-token loss of student against teacher log-probs: a KL estimator (kl|k1, abs, mse|k2, low_var_kl|k3) on ' +
          "the sampled token, or forward_kl_topk over the teacher's top-k tokens",
      ),
      topk: optInt(32, 'forward_kl_topk: teacher tokens per position', positive),
      use_task_rewards: bool(
        true,
        'Keep the PPO loss of the task reward and add distillation_loss_coef × the distillation loss; false: the ' +
          'distillation loss alone (no policy term, entropy bonus or KL loss; rewards are still scored and logged)',
      ),
      distillation_loss_coef: float(1.0, 'Weight of the distillation loss beside the task loss', nonNegative),
      loss_max_clamp: optFloat(null, 'Clamp each token loss to ± this; null: no clamp', positive),
      log_prob_min_clamp: optFloat(null, 'Clamp student and teacher log-probs from below; null: no clamp'),
      use_policy_gradient: bool(
        false,
        'Train on −loss as a per-token advantage through the clipped policy loss instead of back-propagating the loss',
      ),
      policy_loss_mode: oneOf(
        'vanilla',
        ['vanilla'],
        'use_policy_gradient: the policy loss (verl allows vanilla only)',
      ),
      clip_ratio: float(0.2, 'use_policy_gradient: PPO clip ε', openUnitInterval),
      clip_ratio_low: float(0.2, 'use_policy_gradient: lower clip', positive),
      clip_ratio_high: float(0.2, 'use_policy_gradient: upper clip', positive),
    },
  },
  do_search: optBool(
    null,
    'Search-R1 multi-turn rollouts: <search>query</search> → retriever → <information>…</information>, until ' +
      '<answer>; null: on when a retriever (retriever.url, retriever.corpus_path) or the built-in search_qa task is ' +
      "configured, as Search-R1's scripts expect (its default is true)",
  ),
  max_turns: int(
    2,
    'do_search: turns whose search is executed; a last turn follows in which the model must answer',
    positive,
  ),
  retriever: {
    url: optStr(
      null,
      'Search-R1 retrieval server (POST {queries, topk, return_scores}); null: the built-in BM25 over ' +
        'retriever.corpus_path',
    ),
    topk: int(3, 'Documents per search', positive),
    corpus_path: optStr(
      null,
      'JSONL corpus ({"id", "contents"} per line, first line of contents the title) for the built-in BM25; null: the ' +
        "built-in task's corpus",
    ),
    timeout: float(10, 'Seconds to wait for the retrieval server per attempt', positive),
    max_retries: int(3, 'Retries of a failed retrieval request before the run stops', nonNegative),
  },
  trainer: {
    total_epochs: int(30, 'Passes over the training prompts', positive),
    total_training_steps: optInt(null, 'Stop after this many steps; null: total_epochs × steps per epoch', positive),
    project_name: str('verl_examples', 'Project name (part of default_local_dir)'),
    experiment_name: str('gsm8k', 'Experiment name (part of default_local_dir)'),
    logger: new Key<string[]>(
      'strings',
      ['console', 'file'],
      "Metric sinks: console (progress line), file (verl's JSONL: metrics.jsonl in the run directory), tensorboard " +
        '(event files under RUN_DIR/tensorboard or $TENSORBOARD_DIR); wandb, mlflow, swanlab are accepted and skipped',
      false,
      null,
      LOGGERS,
    ),
    log_val_generations: int(
      0,
      'Print and log this many validation samples (prompt, response, score) at each validation',
      nonNegative,
    ),
    rollout_data_dir: optStr(
      null,
      "Write each step's samples to DIR/{step}.jsonl as verl (input, output, gts, score, step, the reward's extra " +
        'fields); null: none',
    ),
    validation_data_dir: optStr(
      null,
      "Write each validation's samples to DIR/{step}.jsonl as verl (with reward and the reward's extra fields); " +
        'null: none',
    ),
    val_before_train: bool(true, 'Validate once before the first step'),
    val_only: bool(false, 'Validate once and stop, without training'),
    test_freq: int(-1, 'Validate every this many steps and after the last; ≤ 0: never'),
    save_freq: int(-1, 'Checkpoint every this many steps and the last; ≤ 0: never (a stop or an error still saves)'),
    critic_warmup: int(0, 'First steps that update only the critic', nonNegative),
    rollout_weights_dir: optStr(
      null,
      "With rollout servers: the shared directory the actor's weights are published to each step (v<step>/, a LoRA " +
        'adapter with LoRA), readable by every server at the same path; null: <default_local_dir>/rollout_weights',
    ),
    default_local_dir: str(
      'checkpoints/${trainer.project_name}/${trainer.experiment_name}',
      'Run directory: global_step_N checkpoints, metrics.jsonl, charts',
    ),
    resume_mode: oneOf(
      'auto',
      ['auto', 'disable', 'resume_path'],
      'auto: continue from the latest checkpoint in default_local_dir; disable: start fresh; resume_path: from ' +
        'resume_from_path',
    ),
    resume_from_path: optStr(null, 'A global_step_N directory to resume from (with resume_mode=resume_path)'),
    max_actor_ckpt_to_keep: optInt(null, 'Keep only the newest N actor checkpoints; null: all', positive),
    max_critic_ckpt_to_keep: optInt(null, 'Keep only the newest N critic checkpoints; null: all', positive),
    save_dtype: oneOf(
      'auto',
      ['auto', 'float32', 'bfloat16', 'float16'],
      'Dtype of saved model weights; auto: the torch_dtype the model came in (bf16 in, bf16 out: half the size; ' +
        'resuming then continues from bf16-rounded weights), float32 for exact resumes',
    ),
    n_gpus_per_node: int(
      1,
      "Adapters per node: this engine trains on one WebGPU adapter (verl's batch sizes are global, so a script " +
        'written for 8 runs the same math here with 1)',
      positive,
    ),
    nnodes: int(1, 'Nodes: one here', positive),
    seed: int(1, 'Seed of built-in model initialisation, sampling and reward masking'),
  },
};

type ConfigOf<S> = { [K in keyof S]: S[K] extends Key<infer T> ? T : ConfigOf<S[K]> };

/** The resolved, validated configuration (verl's key names). */
export type PpoConfig = ConfigOf<typeof SCHEMA>;

export type Group = { [name: string]: Key<unknown> | Group };

function collectKeys(group: Group, prefix = '', out = new Map<string, Key<unknown>>()): Map<string, Key<unknown>> {
  for (const [name, node] of Object.entries(group)) {
    const path = prefix ? `${prefix}.${name}` : name;
    if (node instanceof Key) out.set(path, node);
    else collectKeys(node, path, out);
  }
  return out;
}

/** Every key by its full dotted path, in schema order. */
export const KEYS = collectKeys(SCHEMA);
/** Every group path (data, actor_rollout_ref.actor.optim, …). */
export const GROUPS: ReadonlySet<string> = new Set(
  [...KEYS.keys()].flatMap((path) =>
    path
      .split('.')
      .slice(0, -1)
      .map((_, i, parts) => parts.slice(0, i + 1).join('.')),
  ),
);
