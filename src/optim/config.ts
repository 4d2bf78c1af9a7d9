import { z } from 'zod';

/** AdamW hyperparameters (torch.optim.AdamW names, camel-cased). */
export interface AdamWConfig {
  /** Learning rate. */
  readonly lr: number;
  /** Decay rates of the first and second moment averages. */
  readonly betas: readonly [number, number];
  /** Added to the bias-corrected root second moment. */
  readonly eps: number;
  /** Decoupled weight decay: each step multiplies a parameter by 1 − lr·weightDecay. */
  readonly weightDecay: number;
}

/** Constructor options; every field defaults to torch's value (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.01). */
export type AdamWOptions = Partial<AdamWConfig>;

export const ADAMW_DEFAULTS: AdamWConfig = { lr: 1e-3, betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0.01 };

const beta = (name: string) =>
  z.number({ error: `AdamW ${name} must be a number in [0, 1)` }).min(0, { error: `AdamW ${name} must be in [0, 1)` }).lt(1, {
    error: `AdamW ${name} must be in [0, 1)`,
  });

const nonNegative = (name: string) =>
  z
    .number({ error: `AdamW ${name} must be a finite number >= 0` })
    .refine((x) => Number.isFinite(x) && x >= 0, { error: `AdamW ${name} must be a finite number >= 0` });

export const adamWConfigSchema = z.object({
  lr: nonNegative('lr'),
  betas: z.tuple([beta('betas[0]'), beta('betas[1]')], { error: 'AdamW betas must be a pair [beta1, beta2]' }),
  eps: nonNegative('eps'),
  weightDecay: nonNegative('weightDecay'),
});

/** Fills torch defaults and checks ranges; the error names the field. */
export function resolveAdamWConfig(options: AdamWOptions = {}): AdamWConfig {
  const merged = { ...ADAMW_DEFAULTS, ...stripUndefined(options) };
  const parsed = adamWConfigSchema.safeParse(merged);
  if (!parsed.success) throw new Error(parsed.error.issues.map((i) => i.message).join('; '));
  const c = parsed.data;
  return { lr: c.lr, betas: [c.betas[0], c.betas[1]], eps: c.eps, weightDecay: c.weightDecay };
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
