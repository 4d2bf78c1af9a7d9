/**
 * LoRA settings with PEFT's `LoraConfig` field names, as a run config's `model.lora` section and
 * as `adapter_config.json`. Features comlrl does not implement (DoRA, trainable biases,
 * `modules_to_save`, per-module rank/alpha patterns) are rejected with a message rather than
 * silently ignored, since an adapter trained without them would not be the one the user asked for.
 */
import { z } from 'zod';

/** The linear modules of a Qwen2 / Qwen3 / Llama decoder layer (PEFT's module-name suffixes). */
export const LINEAR_MODULES = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] as const;

const nullish = <T extends z.ZodType>(s: T) => s.nullable().optional();
const emptyMap = (key: string, what: string) =>
  nullish(z.record(z.string(), z.unknown())).refine((v) => v == null || Object.keys(v).length === 0, {
    error: `${key} is not supported (${what}); leave it empty`,
  });

/**
 * The LoRA fields comlrl reads (PEFT's names). Unknown fields are an error in a run config; in an
 * `adapter_config.json` written by PEFT they are checked by {@link parseAdapterConfig}.
 */
export const loraFields = {
  /** Rank of the update B·A. */
  r: z.number({ error: 'r must be an integer >= 1' }).int({ error: 'r must be an integer >= 1' }).min(1, { error: 'r must be an integer >= 1' }).default(8),
  /** Scale numerator: the update is multiplied by lora_alpha / r (or / √r with use_rslora). */
  lora_alpha: z.number({ error: 'lora_alpha must be a number' }).refine(Number.isFinite, { error: 'lora_alpha must be finite' }).default(8),
  /** Dropout on the adapter's input while training (the base path never drops). */
  lora_dropout: z.number({ error: 'lora_dropout must be a number in [0, 1)' }).min(0, { error: 'lora_dropout must be in [0, 1)' }).lt(1, { error: 'lora_dropout must be in [0, 1)' }).default(0),
  /** Module-name suffixes (`q_proj`, ...), `all-linear`, or one regular expression matched against whole module paths. */
  target_modules: z
    .union([z.array(z.string().min(1), { error: 'target_modules must be a list of module names' }).min(1, { error: 'target_modules must not be empty' }), z.string().min(1)], {
      error: "target_modules must be a list of module names (e.g. ['q_proj', 'v_proj']), 'all-linear', or a regular expression",
    })
    .default(['q_proj', 'v_proj']),
  /** Scale by lora_alpha / √r instead of lora_alpha / r (rank-stabilised LoRA). */
  use_rslora: z.boolean({ error: 'use_rslora must be true or false' }).default(false),
  /** Only these layer indices get adapters (null: all). */
  layers_to_transform: nullish(z.union([z.number().int().min(0), z.array(z.number().int().min(0))], { error: 'layers_to_transform must be a layer index or a list of them' })),
  /** Kept from PEFT; comlrl's layers are always `model.layers`. */
  layers_pattern: nullish(z.union([z.string(), z.array(z.string())])).refine((v) => v == null || v === 'layers' || (Array.isArray(v) && v.length === 1 && v[0] === 'layers'), {
    error: "layers_pattern: comlrl's decoders name their layers 'layers'; leave it unset",
  }),
  /** Only `none`: biases stay frozen. */
  bias: z.literal('none', { error: "bias: only 'none' is supported (the base model's biases stay frozen)" }).default('none'),
  /** Only false: Hugging Face decoders store linear weights as [out, in]. */
  fan_in_fan_out: z.literal(false, { error: 'fan_in_fan_out: only false is supported (Qwen/Llama linears are [out, in])' }).default(false),
  /** Only true / 'kaiming' style: A random (seeded), B zero, so a fresh adapter leaves the model unchanged. */
  init_lora_weights: z.literal(true, { error: 'init_lora_weights: only true is supported (A kaiming-uniform, B zeros)' }).default(true),
  modules_to_save: nullish(z.array(z.string())).refine((v) => v == null || v.length === 0, {
    error: 'modules_to_save is not supported: comlrl trains only the LoRA matrices (a critic value head is saved on its own)',
  }),
  exclude_modules: nullish(z.union([z.string(), z.array(z.string())])).refine((v) => v == null || (Array.isArray(v) && v.length === 0), {
    error: 'exclude_modules is not supported; list the wanted modules in target_modules',
  }),
  use_dora: z.literal(false, { error: 'use_dora: DoRA is not supported' }).default(false),
  lora_bias: z.literal(false, { error: 'lora_bias: a trainable LoRA bias is not supported' }).default(false),
  rank_pattern: emptyMap('rank_pattern', 'one rank for every module'),
  alpha_pattern: emptyMap('alpha_pattern', 'one alpha for every module'),
  /** Written to adapter_config.json; `task_type` must be CAUSAL_LM. */
  task_type: nullish(z.literal('CAUSAL_LM', { error: "task_type must be 'CAUSAL_LM'" })),
  /** Where the base model lives; comlrl writes the base directory here. */
  base_model_name_or_path: nullish(z.string()),
  revision: nullish(z.string()),
  inference_mode: z.boolean().optional(),
} as const;

/** A run config's `model.lora` / `model.critic_lora` section (strict: misspelt keys are errors). */
export const loraSectionSchema = z.strictObject({
  ...loraFields,
  /** comlrl only: the final save also writes the merged full model into `agent_i/merged/` (critics: `<critic dir>/merged/`). */
  save_merged: z.boolean({ error: 'save_merged must be true or false' }).default(false),
});

/** The `model.lora` section after defaults. */
export type LoraSection = z.output<typeof loraSectionSchema>;

/** What an adapter needs to know about its settings. */
export interface LoraSettings {
  readonly r: number;
  readonly loraAlpha: number;
  readonly loraDropout: number;
  /** As given: suffix list or one string ('all-linear' or a regular expression). */
  readonly targetModules: readonly string[] | string;
  readonly useRslora: boolean;
  readonly layersToTransform: readonly number[] | null;
  /** The base directory or name written into adapter_config.json. */
  readonly baseModelNameOrPath: string | null;
  readonly revision: string | null;
}

/** The update's multiplier: alpha / r, or alpha / √r for rank-stabilised LoRA. */
export function loraScale(s: Pick<LoraSettings, 'r' | 'loraAlpha' | 'useRslora'>): number {
  return s.useRslora ? s.loraAlpha / Math.sqrt(s.r) : s.loraAlpha / s.r;
}

/** Settings from a parsed config section. */
export function loraSettings(c: z.output<z.ZodObject<typeof loraFields>>): LoraSettings {
  const ltt = c.layers_to_transform;
  return {
    r: c.r,
    loraAlpha: c.lora_alpha,
    loraDropout: c.lora_dropout,
    targetModules: c.target_modules,
    useRslora: c.use_rslora,
    layersToTransform: ltt == null ? null : typeof ltt === 'number' ? [ltt] : [...ltt],
    baseModelNameOrPath: c.base_model_name_or_path ?? null,
    revision: c.revision ?? null,
  };
}

const adapterConfigSchema = z.looseObject({
  ...loraFields,
  peft_type: z.literal('LORA', { error: "peft_type must be 'LORA' (only LoRA adapters are supported)" }),
  r: z.number({ error: 'r is required (an integer >= 1)' }).int().min(1),
  lora_alpha: z.number({ error: 'lora_alpha is required (a number)' }),
  // PEFT writes target_modules as a list or string; a missing value means PEFT guessed them from the model type.
  target_modules: z.union([z.array(z.string()), z.string()], { error: 'target_modules is required (a list of module names or a string)' }),
  // PEFT writes null for these when unused.
  lora_dropout: z.number().min(0).lt(1).nullable().optional(),
  use_rslora: z.boolean().nullable().optional(),
  bias: z.literal('none', { error: "bias: only 'none' is supported (the base model's biases stay frozen)" }).nullable().optional(),
  fan_in_fan_out: z.literal(false, { error: 'fan_in_fan_out: only false is supported (Qwen/Llama linears are [out, in])' }).nullable().optional(),
  init_lora_weights: z.unknown().optional(),
  use_dora: z.literal(false, { error: 'use_dora: DoRA adapters are not supported' }).nullable().optional(),
  lora_bias: z.literal(false, { error: 'lora_bias: a trainable LoRA bias is not supported' }).nullable().optional(),
});

/** Parses an `adapter_config.json` object; errors name the file and field. */
export function parseAdapterConfig(raw: unknown, file: string): LoraSettings {
  const p = adapterConfigSchema.safeParse(raw);
  if (!p.success) {
    const msg = p.error.issues.map((i) => `${i.path.join('.') || '(top level)'}: ${i.message}`).join('; ');
    throw new Error(`${file}: ${msg}`);
  }
  const c = p.data;
  const ltt = c.layers_to_transform;
  return {
    r: c.r,
    loraAlpha: c.lora_alpha,
    loraDropout: c.lora_dropout ?? 0,
    targetModules: c.target_modules,
    useRslora: c.use_rslora ?? false,
    layersToTransform: ltt == null ? null : typeof ltt === 'number' ? [ltt] : [...ltt],
    baseModelNameOrPath: c.base_model_name_or_path ?? null,
    revision: c.revision ?? null,
  };
}

/** The adapter_config.json object PEFT writes for these settings (every field PEFT's LoraConfig users read). */
export function adapterConfigJson(s: LoraSettings, targets: readonly string[]): Record<string, unknown> {
  return {
    alpha_pattern: {},
    auto_mapping: null,
    base_model_name_or_path: s.baseModelNameOrPath,
    bias: 'none',
    exclude_modules: null,
    fan_in_fan_out: false,
    inference_mode: true,
    init_lora_weights: true,
    layer_replication: null,
    layers_pattern: null,
    layers_to_transform: s.layersToTransform ? [...s.layersToTransform] : null,
    loftq_config: {},
    lora_alpha: s.loraAlpha,
    lora_bias: false,
    lora_dropout: s.loraDropout,
    megatron_config: null,
    megatron_core: 'megatron.core',
    modules_to_save: null,
    peft_type: 'LORA',
    r: s.r,
    rank_pattern: {},
    revision: s.revision,
    // The resolved suffixes (sorted, as PEFT stores a set), so loaders need not expand 'all-linear'.
    target_modules: typeof s.targetModules === 'string' && s.targetModules !== 'all-linear' ? s.targetModules : [...targets].sort(),
    task_type: 'CAUSAL_LM',
    use_dora: false,
    use_rslora: s.useRslora,
  };
}

/**
 * Module paths (`model.layers.3.self_attn.q_proj`) of a decoder with `numLayers` layers that the
 * settings put adapters on, in checkpoint order. Follows PEFT's matching: a list matches a module
 * whose name is an entry or ends with `.entry`; a string other than 'all-linear' must match the
 * whole module path as a regular expression. Throws when nothing matches.
 */
export function targetModulePaths(s: LoraSettings, numLayers: number): string[] {
  const t = s.targetModules;
  let match: (modulePath: string, leaf: string) => boolean;
  if (t === 'all-linear') match = () => true;
  else if (typeof t === 'string') {
    let re: RegExp;
    try {
      re = new RegExp(`^(?:${t})$`);
    } catch (err) {
      throw new Error(`lora.target_modules: '${t}' is not a valid regular expression (${(err as Error).message})`);
    }
    match = (p) => re.test(p);
  } else {
    match = (p, leaf) => t.some((x) => x === leaf || x === p || p.endsWith(`.${x}`));
  }
  const layers = s.layersToTransform ? new Set(s.layersToTransform) : null;
  if (layers) for (const l of layers) if (l >= numLayers) throw new Error(`lora.layers_to_transform: layer ${l} does not exist (the model has ${numLayers} layers)`);
  const out: string[] = [];
  for (let l = 0; l < numLayers; l++) {
    if (layers && !layers.has(l)) continue;
    for (const leaf of LINEAR_MODULES) {
      const p = `model.layers.${l}.${leaf.endsWith('_proj') && ['gate_proj', 'up_proj', 'down_proj'].includes(leaf) ? 'mlp' : 'self_attn'}.${leaf}`;
      if (match(p, leaf)) out.push(p);
    }
  }
  if (out.length === 0) {
    throw new Error(
      `lora.target_modules ${JSON.stringify(t)} matches no module of the model; its linear modules are ${LINEAR_MODULES.join(', ')} (or use 'all-linear')`,
    );
  }
  if (Array.isArray(t)) {
    const leaves = new Set(out.map((p) => p.slice(p.lastIndexOf('.') + 1)));
    const unknown = t.filter((x) => !LINEAR_MODULES.includes(x as (typeof LINEAR_MODULES)[number]) && !out.some((p) => p === x || p.endsWith(`.${x}`)));
    if (unknown.length > 0) {
      throw new Error(`lora.target_modules: ${unknown.map((u) => `'${u}'`).join(', ')} name no module of the model (its linear modules: ${LINEAR_MODULES.join(', ')}; matched: ${[...leaves].join(', ')})`);
    }
  }
  return out;
}
