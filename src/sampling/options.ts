import { z } from 'zod';

/**
 * Per-step sampling settings, the subset of {@link SamplingOptions} that shapes one next-token
 * distribution. Semantics follow Hugging Face `generate(do_sample=True)`: temperature divides the
 * logits, then top-k, then top-p (nucleus).
 */
export interface NextTokenOptions {
  /** Argmax decoding; temperature, top-k and top-p are then ignored. */
  greedy?: boolean;
  /** Softmax temperature, strictly positive. Default 1. Use `greedy` for deterministic decoding. */
  temperature?: number;
  /**
   * Keep the k highest logits (ties with the k-th are kept, as HF does); 0, null or undefined = off.
   * (A run config's `top_k: null` is not passed here as null: trainers first resolve it to the
   * checkpoint's value or 50, see `resolveSampling`.)
   */
  topK?: number | null;
  /** Nucleus mass in (0, 1]; 1 (default) = off. */
  topP?: number;
}

/** {@link NextTokenOptions} with defaults filled in and values checked. */
export interface ResolvedNextTokenOptions {
  readonly greedy: boolean;
  readonly temperature: number;
  /** 0 when top-k is off. */
  readonly topK: number;
  readonly topP: number;
}

const nextTokenOptionsSchema = z.object({
  greedy: z.boolean({ error: 'sampling option `greedy` must be a boolean' }).optional(),
  temperature: z
    .number({ error: 'sampling option `temperature` must be a number' })
    .refine((t) => Number.isFinite(t) && t > 0, {
      // HF rejects temperature <= 0 for sampling as well; greedy decoding is the explicit alternative.
      message: 'sampling option `temperature` must be a finite number > 0 (use `greedy: true` for argmax decoding)',
    })
    .optional(),
  topK: z
    .number({ error: 'sampling option `topK` must be an integer >= 0 or null' })
    .int({ error: 'sampling option `topK` must be an integer >= 0 or null' })
    .min(0, { error: 'sampling option `topK` must be an integer >= 0 or null (0/null = off)' })
    .nullable()
    .optional(),
  topP: z
    .number({ error: 'sampling option `topP` must be a number in (0, 1]' })
    .refine((p) => p > 0 && p <= 1, { error: 'sampling option `topP` must be in (0, 1] (1 = off)' })
    .optional(),
});

/**
 * Checks sampling options and fills defaults; throws an Error naming the offending option. With
 * `greedy: true` the other fields are not read.
 */
export function resolveNextTokenOptions(options: NextTokenOptions): ResolvedNextTokenOptions {
  // Greedy ignores the sampling fields, so e.g. `{ greedy: true, temperature: 0 }` is accepted.
  if (options.greedy === true) return { greedy: true, temperature: 1, topK: 0, topP: 1 };
  const parsed = nextTokenOptionsSchema.safeParse(options);
  if (!parsed.success) {
    throw new Error(parsed.error.issues.map((i) => i.message).join('; '));
  }
  const o = parsed.data;
  return {
    greedy: o.greedy ?? false,
    temperature: o.temperature ?? 1,
    topK: o.topK ?? 0,
    topP: o.topP ?? 1,
  };
}
