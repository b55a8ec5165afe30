// LoRA adapters as PEFT builds them for verl (LoraConfig r, lora_alpha, target_modules, bias="none"): each targeted
// linear W [out, in] gains out += scaling·(x·Aᵀ)·Bᵀ with A [r, in] and B [out, r], scaling = lora_alpha / r
// (lora_alpha / √r with use_rslora). The engine fuses q/k/v and gate/up into one projection, so their adapters are
// fused too: the targeted modules' A matrices stacked into one [n·r, in] tensor (one matmul x·Aᵀ for all of them)
// and their B matrices as one block-structured Bᵀ [n·r, out] — module i's rows of Bᵀ are non-zero only in its own
// output columns. The off-block entries start at zero and their gradients are cleared before every optimizer step
// (zero gradient and zero weight stay zero under AdamW's decoupled decay), so they never move; the ranges to clear
// (offBlockRanges, one per row) go to kernels/util/clear-ranges as one table (lora-adapters.ts).
// Names, layouts and adapter_config.json follow PEFT, so adapters load in PEFT and PEFT's load here.
import { elementCount, Rng, type ArenaEntry } from '../engine/index.ts';
import type { DecoderConfig } from './hf-config.ts';
import { layerPrefix, qkvWidth } from './parameter-layout.ts';
import type { NamedTensor } from './parameter-store.ts';

/** The linear modules of a Llama/Qwen decoder layer, as PEFT's target_modules names them. */
export const LORA_MODULES = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] as const;
export type LoraModule = (typeof LORA_MODULES)[number];
/** PEFT's shorthand for every linear layer but the output head. */
export const ALL_LINEAR = 'all-linear';

export interface LoraSettings {
  rank: number;
  alpha: number;
  targetModules: readonly LoraModule[];
  /** PEFT's use_rslora: scaling lora_alpha / √r. */
  useRslora: boolean;
}

/** PEFT's adapter_config.json fields, as a user reads them: "r=4, lora_alpha=8, target_modules [q_proj, v_proj]". */
export function describeLoraSettings(s: LoraSettings): string {
  return `r=${s.rank}, lora_alpha=${s.alpha}, target_modules [${s.targetModules.join(', ')}]`;
}

/** Whether adapters of settings `a` are adapters of settings `b` (the target set in any order). */
export function sameLoraSettings(a: LoraSettings, b: LoraSettings): boolean {
  return (
    a.rank === b.rank &&
    a.alpha === b.alpha &&
    a.useRslora === b.useRslora &&
    [...a.targetModules].sort().join() === [...b.targetModules].sort().join()
  );
}

export function loraScaling(s: LoraSettings): number {
  return s.useRslora ? s.alpha / Math.sqrt(s.rank) : s.alpha / s.rank;
}

/** The engine projections (one matmul each) that adapters attach to. */
export type ProjectionKind = 'qkv' | 'o' | 'gateUp' | 'down';

export interface LoraProjection {
  layer: number;
  kind: ProjectionKind;
  /** Arena names of the stacked A (n·r, in) and the block-structured Bᵀ (n·r, out). */
  a: string;
  bT: string;
  inFeatures: number;
  outFeatures: number;
  /** The targeted modules in stacking order: module i owns rows [i·r, (i+1)·r) of A and Bᵀ and its output columns. */
  modules: { name: LoraModule; hfModule: string; column: number; width: number }[];
}

/** target_modules (verl passes it to PEFT: 'all-linear' or module names) less exclude_modules; errors name `key`. */
export function resolveTargetModules(
  target: readonly string[],
  exclude: readonly string[] | null,
  key: string,
): LoraModule[] {
  const known = (names: readonly string[], which: string) => {
    const bad = names.filter((n) => n !== ALL_LINEAR && !(LORA_MODULES as readonly string[]).includes(n));
    if (bad.length > 0) {
      throw new Error(
        `${which}: unknown module ${bad.map((b) => `'${b}'`).join(', ')}; expected '${ALL_LINEAR}' or names from ` +
          `${LORA_MODULES.join(', ')}`,
      );
    }
  };
  known(target, key);
  const excludeKey = key.replace(/target_modules$/, 'exclude_modules');
  known(exclude ?? [], excludeKey);
  const wanted = target.includes(ALL_LINEAR) ? [...LORA_MODULES] : LORA_MODULES.filter((m) => target.includes(m));
  const chosen = wanted.filter((m) => !(exclude ?? []).includes(m));
  if (chosen.length === 0)
    throw new Error(
      `${key}: no module left to adapt (target_modules [${target.join(', ')}], exclude_modules ` +
        `[${(exclude ?? []).join(', ')}])`,
    );
  return chosen;
}

/** Every projection that has at least one targeted module, layer by layer. */
export function loraProjections(c: DecoderConfig, s: LoraSettings): LoraProjection[] {
  const C = c.hiddenSize;
  const HS = c.headDim;
  const I = c.intermediateSize;
  const out: LoraProjection[] = [];
  for (let l = 0; l < c.numLayers; l++) {
    const p = layerPrefix(l);
    const table: [ProjectionKind, string, number, number, [LoraModule, string, number, number][]][] = [
      [
        'qkv',
        `${p}.self_attn.qkv_proj`,
        C,
        qkvWidth(c),
        [
          ['q_proj', `${p}.self_attn.q_proj`, 0, c.numHeads * HS],
          ['k_proj', `${p}.self_attn.k_proj`, c.numHeads * HS, c.numKvHeads * HS],
          ['v_proj', `${p}.self_attn.v_proj`, (c.numHeads + c.numKvHeads) * HS, c.numKvHeads * HS],
        ],
      ],
      ['o', `${p}.self_attn.o_proj`, c.numHeads * HS, C, [['o_proj', `${p}.self_attn.o_proj`, 0, C]]],
      [
        'gateUp',
        `${p}.mlp.gate_up_proj`,
        C,
        2 * I,
        [
          ['gate_proj', `${p}.mlp.gate_proj`, 0, I],
          ['up_proj', `${p}.mlp.up_proj`, I, I],
        ],
      ],
      ['down', `${p}.mlp.down_proj`, I, C, [['down_proj', `${p}.mlp.down_proj`, 0, C]]],
    ];
    for (const [kind, engineName, inFeatures, outFeatures, modules] of table) {
      const targeted = modules.filter(([name]) => s.targetModules.includes(name));
      if (targeted.length === 0) continue;
      out.push({
        layer: l,
        kind,
        a: `${engineName}.lora_A`,
        bT: `${engineName}.lora_B_T`,
        inFeatures,
        outFeatures,
        modules: targeted.map(([name, hfModule, column, width]) => ({ name, hfModule, column, width })),
      });
    }
  }
  return out;
}

/** Rows of a projection's stacked A and Bᵀ. */
export function stackedRank(p: LoraProjection, s: LoraSettings): number {
  return p.modules.length * s.rank;
}

export function loraEntries(c: DecoderConfig, s: LoraSettings): ArenaEntry[] {
  return loraProjections(c, s).flatMap((p) => [
    { name: p.a, shape: [stackedRank(p, s), p.inFeatures] },
    { name: p.bT, shape: [stackedRank(p, s), p.outFeatures] },
  ]);
}

/** Trainable parameters: r·(in + out) per targeted module, as PEFT's print_trainable_parameters counts them. */
export function loraParameterCount(c: DecoderConfig, s: LoraSettings): number {
  return loraProjections(c, s).reduce(
    (n, p) => n + p.modules.reduce((m, mod) => m + s.rank * (p.inFeatures + mod.width), 0),
    0,
  );
}

/** Arena elements (the stacked layout, off-block zeros included): what gradients and AdamW moments occupy. */
export function loraArenaElements(c: DecoderConfig, s: LoraSettings): number {
  return loraEntries(c, s).reduce((n, e) => n + elementCount(e.shape), 0);
}

/** Element ranges [start, end) of Bᵀ outside each module's block, adjacent ranges merged: the entries held at 0. */
export function offBlockRanges(p: LoraProjection, s: LoraSettings): [number, number][] {
  const ranges: [number, number][] = [];
  const push = (start: number, end: number) => {
    if (end <= start) return;
    const last = ranges[ranges.length - 1];
    if (last && last[1] === start) last[1] = end;
    else ranges.push([start, end]);
  };
  p.modules.forEach((m, i) => {
    for (let row = i * s.rank; row < (i + 1) * s.rank; row++) {
      const base = row * p.outFeatures;
      push(base, base + m.column);
      push(base + m.column + m.width, base + p.outFeatures);
    }
  });
  return ranges;
}

/** PEFT's fresh adapter (init_lora_weights=True): A kaiming-uniform(a=√5), i.e. U(−1/√in, 1/√in); B zeros, so the
 *  adapted model starts equal to the base model. */
export function initialLoraValues(c: DecoderConfig, s: LoraSettings, seed: number): Map<string, Float32Array> {
  const rng = new Rng(seed);
  const values = new Map<string, Float32Array>();
  for (const p of loraProjections(c, s)) {
    const a = new Float32Array(stackedRank(p, s) * p.inFeatures);
    const bound = 1 / Math.sqrt(p.inFeatures);
    for (let i = 0; i < a.length; i++) a[i] = (2 * rng.next() - 1) * bound;
    values.set(p.a, a);
    values.set(p.bT, new Float32Array(stackedRank(p, s) * p.outFeatures));
  }
  return values;
}

export const PEFT_PREFIX = 'base_model.model.';

export function peftNames(hfModule: string): { a: string; b: string } {
  return { a: `${PEFT_PREFIX}${hfModule}.lora_A.weight`, b: `${PEFT_PREFIX}${hfModule}.lora_B.weight` };
}

/** The adapters as PEFT's adapter_model.safetensors holds them: lora_A [r, in], lora_B [out, r] per module. */
export function peftTensors(
  c: DecoderConfig,
  s: LoraSettings,
  values: ReadonlyMap<string, Float32Array>,
): Map<string, NamedTensor> {
  const r = s.rank;
  const out = new Map<string, NamedTensor>();
  for (const p of loraProjections(c, s)) {
    const a = values.get(p.a)!;
    const bT = values.get(p.bT)!;
    p.modules.forEach((m, i) => {
      const names = peftNames(m.hfModule);
      out.set(names.a, { shape: [r, p.inFeatures], data: a.slice(i * r * p.inFeatures, (i + 1) * r * p.inFeatures) });
      const b = new Float32Array(m.width * r);
      for (let o = 0; o < m.width; o++)
        for (let j = 0; j < r; j++) b[o * r + j] = bT[(i * r + j) * p.outFeatures + m.column + o];
      out.set(names.b, { shape: [m.width, r], data: b });
    });
  }
  return out;
}

/** The stacked arena tensors from PEFT-named ones; `lookup` returns undefined for a missing name (an error). */
export function loraValuesFromPeft(
  c: DecoderConfig,
  s: LoraSettings,
  lookup: (name: string) => NamedTensor | undefined,
  source: string,
): Map<string, Float32Array> {
  const r = s.rank;
  const values = new Map<string, Float32Array>();
  const tensor = (name: string, shape: number[]) => {
    const t = lookup(name);
    if (!t) throw new Error(`${source}: missing tensor ${name} (shape [${shape.join(', ')}])`);
    if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
      throw new Error(`${source}: tensor ${name} has shape [${t.shape.join(', ')}], expected [${shape.join(', ')}]`);
    }
    return t.data;
  };
  for (const p of loraProjections(c, s)) {
    const a = new Float32Array(stackedRank(p, s) * p.inFeatures);
    const bT = new Float32Array(stackedRank(p, s) * p.outFeatures);
    p.modules.forEach((m, i) => {
      const names = peftNames(m.hfModule);
      a.set(tensor(names.a, [r, p.inFeatures]), i * r * p.inFeatures);
      const b = tensor(names.b, [m.width, r]);
      for (let o = 0; o < m.width; o++)
        for (let j = 0; j < r; j++) bT[(i * r + j) * p.outFeatures + m.column + o] = b[o * r + j];
    });
    values.set(p.a, a);
    values.set(p.bT, bT);
  }
  return values;
}

/** HF weights with every adapter merged in: W + scaling·B·A (accumulated in float64), the rest unchanged. */
export function mergeLora(
  c: DecoderConfig,
  s: LoraSettings,
  base: ReadonlyMap<string, NamedTensor>,
  adapters: ReadonlyMap<string, NamedTensor>,
): Map<string, NamedTensor> {
  const scaling = loraScaling(s);
  const r = s.rank;
  const merged = new Map(base);
  for (const p of loraProjections(c, s)) {
    for (const m of p.modules) {
      const weightName = `${m.hfModule}.weight`;
      const w = base.get(weightName)!;
      const names = peftNames(m.hfModule);
      const a = adapters.get(names.a)!.data;
      const b = adapters.get(names.b)!.data;
      const data = new Float32Array(w.data.length);
      for (let o = 0; o < m.width; o++) {
        for (let k = 0; k < p.inFeatures; k++) {
          let delta = 0;
          for (let j = 0; j < r; j++) delta += b[o * r + j] * a[j * p.inFeatures + k];
          data[o * p.inFeatures + k] = w.data[o * p.inFeatures + k] + scaling * delta;
        }
      }
      merged.set(weightName, { shape: w.shape, data });
    }
  }
  return merged;
}

/** adapter_config.json as PEFT writes it for this adapter (the fields LoraConfig reads). */
/** `modulesToSave`: base modules trained and saved whole beside the adapters (a critic's ['score'], PEFT's
 *  modules_to_save; task_type TOKEN_CLS then, as PEFT's for a token classifier). */
export function peftAdapterConfig(
  s: LoraSettings,
  baseModel: string | null,
  modulesToSave: readonly string[] = [],
): Record<string, unknown> {
  return {
    alpha_pattern: {},
    auto_mapping: null,
    base_model_name_or_path: baseModel,
    bias: 'none',
    fan_in_fan_out: false,
    inference_mode: true,
    init_lora_weights: true,
    layers_pattern: null,
    layers_to_transform: null,
    lora_alpha: s.alpha,
    lora_dropout: 0,
    modules_to_save: modulesToSave.length > 0 ? [...modulesToSave] : null,
    peft_type: 'LORA',
    r: s.rank,
    rank_pattern: {},
    revision: null,
    target_modules: [...s.targetModules],
    task_type: modulesToSave.length > 0 ? 'TOKEN_CLS' : 'CAUSAL_LM',
    use_dora: false,
    use_rslora: s.useRslora,
  };
}

/** LoRA settings of a PEFT adapter_config.json; features this engine does not run are refused by name.
 *  modules_to_save is accepted when it names only `allowedModulesToSave` (a critic's head). */
export function parsePeftAdapterConfig(
  json: Record<string, unknown>,
  file: string,
  allowedModulesToSave: readonly string[] = [],
): LoraSettings {
  if (json.peft_type !== 'LORA')
    throw new Error(`${file}: peft_type is ${JSON.stringify(json.peft_type)}, expected "LORA"`);
  const r = json.r;
  const alpha = json.lora_alpha ?? 8;
  if (typeof r !== 'number' || !Number.isInteger(r) || r < 1)
    throw new Error(`${file}: r is ${JSON.stringify(r)}, expected a positive integer`);
  if (typeof alpha !== 'number') throw new Error(`${file}: lora_alpha is ${JSON.stringify(alpha)}, expected a number`);
  const unsupported: [string, (v: unknown) => boolean][] = [
    ['bias', (v) => v === undefined || v === 'none'],
    ['use_dora', (v) => !v],
    ['fan_in_fan_out', (v) => !v],
    ['layers_to_transform', (v) => v === undefined || v === null],
    [
      'modules_to_save',
      (v) => v === undefined || v === null || (Array.isArray(v) && v.every((m) => allowedModulesToSave.includes(m))),
    ],
    ['rank_pattern', (v) => v === undefined || v === null || Object.keys(v as object).length === 0],
    ['alpha_pattern', (v) => v === undefined || v === null || Object.keys(v as object).length === 0],
  ];
  for (const [field, ok] of unsupported) {
    if (!ok(json[field]))
      throw new Error(
        `${file}: ${field}=${JSON.stringify(json[field])} is not supported (only plain LoRA on the decoder's linear ` +
          `layers)`,
      );
  }
  const target = json.target_modules;
  const list = typeof target === 'string' ? [target] : Array.isArray(target) ? target.map(String) : null;
  if (!list)
    throw new Error(
      `${file}: target_modules is ${JSON.stringify(target)}, expected a list of module names or "${ALL_LINEAR}"`,
    );
  const exclude = json.exclude_modules;
  const excludeList = typeof exclude === 'string' ? [exclude] : Array.isArray(exclude) ? exclude.map(String) : null;
  return {
    rank: r,
    alpha,
    targetModules: resolveTargetModules(list, excludeList, `${file}: target_modules`),
    useRslora: json.use_rslora === true,
  };
}
