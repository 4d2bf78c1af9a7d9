/**
 * The `comlrl-trainer-vector/1` format: one training update of CoMLRL's MAGRPOTrainer, IACTrainer
 * or MAACTrainer on fixed completions and a table reward, with everything CoMLRL computed
 * (../shared/vectors/comlrl-trainers/README.md describes every field). Parsed once here; only the
 * fields the parity check reads are typed, the rest pass through.
 */
import { readFile } from 'node:fs/promises';
import { z } from 'zod';

const ids = z.array(z.number().int());
const nums = z.array(z.number());

const stepSchema = z.looseObject({
  index: z.number().int(),
  model: z.string(),
  phase: z.string(),
  adam_step_count: z.number().int(),
  backward_losses: nums,
  grad_norm: z.number(),
  params: z.record(z.string(), z.looseObject({ grad_none: z.boolean(), grad_l2: z.number().nullable(), delta_l2: z.number() })),
  grad_first8: z.record(z.string(), nums.nullable()),
});

const completionSchema = z.looseObject({
  row_ids: ids,
  scored_token_ids: ids,
  token_logprobs: nums,
  logprob_sum: z.number(),
  advantage: z.number(),
  loss_term: z.number(),
});

const magrpoSchema = z.looseObject({
  nodes: z.array(
    z.looseObject({
      node: z.number().int(),
      turn: z.number().int(),
      node_env_step: z.number().int(),
      agents: z.array(z.looseObject({ agent: z.number().int(), prompt: z.string(), prompt_ids: ids, rows: z.array(ids), texts: z.array(z.string()), response_lens: z.array(z.number().int()) })),
      rewards: nums,
      returns: nums,
    }),
  ),
  losses: z.array(
    z.looseObject({
      model: z.string(),
      turn: z.number().int(),
      node_env_step: z.number().int(),
      prompt_len: z.number().int(),
      returns: nums,
      advantages_before_normalization: nums,
      advantages: nums,
      completions: z.array(completionSchema),
      loss: z.number(),
    }),
  ),
});

const acSampleSchema = z.looseObject({
  sample: z.number().int(),
  agent: z.number().int(),
  turn: z.number().int(),
  generation: z.number().int(),
  prompt: z.string(),
  prompt_len: z.number().int(),
  full_input_ids: ids,
  response_len: z.number().int(),
  completion_text: z.string(),
  reward: z.number(),
  old_logprob: z.number(),
  old_value: z.number(),
  value_target: z.number(),
  critic_input_ids: ids.nullable().optional(),
});

const acSchema = z.looseObject({
  samples: z.array(acSampleSchema),
  updates: z.array(
    z.looseObject({
      agent: z.number().int(),
      turn: z.number().int(),
      advantages: z.array(z.looseObject({ sample: z.number().int(), advantage: z.number(), normalized_advantage: z.number() })),
    }),
  ),
  ac_steps: z.array(
    z.looseObject({
      phase: z.string(),
      agent: z.number().int(),
      samples_in_step_order: z.array(
        z.looseObject({
          sample: z.number().int(),
          scored_token_ids: ids,
          token_logprobs: nums,
          logprob_sum: z.number(),
          value: z.number(),
          value_input_ids: ids,
          normalized_advantage: z.number(),
          value_target: z.number(),
        }),
      ),
      actor_loss: z.number(),
      value_loss: z.number(),
      value_loss_coef: z.number(),
    }),
  ),
});

/** The trainers the format records, by CoMLRL class name. */
export const VECTOR_TRAINERS = ['MAGRPOTrainer', 'IACTrainer', 'MAACTrainer'] as const;

const vectorSchema = z.looseObject({
  format: z.literal('comlrl-trainer-vector/1', { error: "format must be 'comlrl-trainer-vector/1'" }),
  case: z.string(),
  trainer: z.enum(VECTOR_TRAINERS),
  model: z.looseObject({
    key: z.string(),
    spec: z.looseObject({ hidden: z.number().int(), layers: z.number().int(), heads: z.number().int(), kv_heads: z.number().int(), tie: z.boolean(), seed: z.number().int() }),
    command: z.string(),
    sha256: z.record(z.string(), z.string()),
  }),
  config: z.record(z.string(), z.unknown()),
  optimizers: z.record(z.string(), z.looseObject({ lr: z.number(), betas: z.tuple([z.number(), z.number()]), eps: z.number(), weight_decay: z.number() })),
  inputs: z.looseObject({
    dataset_item: z.looseObject({ prompt: z.string() }),
    formatters: z.array(z.string()),
    external_transition: z.string().nullable(),
    reward_table: z.array(z.looseObject({ agent0_text: z.string(), agent1_text: z.string(), reward: z.number() })),
    reward_calls: z.array(z.looseObject({ agent0: z.array(z.string()), agent1: z.array(z.string()), rewards: nums })),
  }),
  value_heads_init: z.record(z.string(), z.record(z.string(), z.looseObject({ shape: z.array(z.number().int()), values: nums }))),
  steps: z.array(stepSchema),
  params: z.record(z.string(), z.record(z.string(), z.looseObject({ shape: z.array(z.number().int()), delta_l2: z.number(), delta_max_abs: z.number(), got_grad: z.boolean() }))),
  tensor_samples: z.looseObject({
    embedding_rows: z.array(z.number().int()),
    delta: z.record(z.string(), z.record(z.string(), nums)),
  }),
  magrpo: magrpoSchema.optional(),
  ac: acSchema.optional(),
});

/** One parsed vector file. */
export type TrainerVector = z.infer<typeof vectorSchema>;
/** A recorded AdamW step. */
export type VectorStep = z.infer<typeof stepSchema>;

/** Reads and checks a vector file; throws naming the file and the first bad fields. */
export async function readTrainerVector(file: string): Promise<TrainerVector> {
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(file, 'utf8'));
  } catch (err) {
    throw new Error(`${file}: not a readable JSON file (${(err as Error).message})`);
  }
  const parsed = vectorSchema.safeParse(raw);
  if (!parsed.success) {
    const issues = parsed.error.issues.slice(0, 5).map((i) => `${i.path.join('.') || '(top)'}: ${i.message}`);
    throw new Error(`${file}: not a comlrl-trainer-vector/1 file: ${issues.join('; ')}`);
  }
  const v = parsed.data;
  if (v.trainer === 'MAGRPOTrainer' && !v.magrpo) throw new Error(`${file}: a MAGRPOTrainer case needs the 'magrpo' section`);
  if (v.trainer !== 'MAGRPOTrainer' && !v.ac) throw new Error(`${file}: a ${v.trainer} case needs the 'ac' section`);
  return v;
}
