/**
 * Learning-rate schedules with the Hugging Face Trainer's names and shapes (`lr_scheduler_type`:
 * constant, constant_with_warmup, linear, cosine; `warmup_steps` / `warmup_ratio`). A schedule is a
 * factor λ(s) ∈ [0, 1] of the base learning rate at step s = 0, 1, …, T − 1 of a run of T steps,
 * with W warmup steps:
 *
 *   warmup (s < W, every type but constant):  λ = s / max(1, W)
 *   constant:                                  λ = 1 (no warmup)
 *   constant_with_warmup (s ≥ W):              λ = 1
 *   linear (s ≥ W):                            λ = max(0, (T − s) / max(1, T − W))
 *   cosine (s ≥ W):                            λ = max(0, ½·(1 + cos(π·p))),  p = (s − W) / max(1, T − W)
 *
 * As in HF, step 0 of a warmup has λ = 0 and the decays reach 0 at s = T, one past the last step,
 * so every step of the run has a positive rate once warmup is over. W = `warmup_steps` when it is
 * > 0, else ⌈T · warmup_ratio⌉ (HF's rule: `warmup_steps` wins). What a step is, and T, are the
 * caller's (trainers: one training item, see TrainerBase).
 */
import { z } from 'zod';

/** The schedule shapes, by HF's `lr_scheduler_type` names. */
export const LR_SCHEDULER_TYPES = ['constant', 'constant_with_warmup', 'linear', 'cosine'] as const;
/** See {@link LR_SCHEDULER_TYPES}. */
export type LrSchedulerType = (typeof LR_SCHEDULER_TYPES)[number];

/** A schedule resolved for one run: its shape, warmup steps W and total steps T. */
export interface LrSchedule {
  readonly type: LrSchedulerType;
  /** W: steps of linear warmup from 0 (ignored by `constant`). */
  readonly warmupSteps: number;
  /** T: steps in the run. */
  readonly totalSteps: number;
}

/** W from HF's two settings: `warmupSteps` when > 0, else ⌈totalSteps · warmupRatio⌉. */
export function resolveWarmupSteps(warmupSteps: number, warmupRatio: number, totalSteps: number): number {
  if (!Number.isInteger(warmupSteps) || warmupSteps < 0) throw new Error(`warmup_steps must be an integer >= 0, got ${warmupSteps}`);
  if (!(warmupRatio >= 0 && warmupRatio <= 1)) throw new Error(`warmup_ratio must be a number in [0, 1], got ${warmupRatio}`);
  if (!Number.isInteger(totalSteps) || totalSteps < 0) throw new Error(`the total step count must be an integer >= 0, got ${totalSteps}`);
  return warmupSteps > 0 ? warmupSteps : Math.ceil(totalSteps * warmupRatio);
}

/** λ(step) of `schedule` (see the module comment); steps past the end keep the end value. */
export function lrFactor(schedule: LrSchedule, step: number): number {
  if (!Number.isInteger(step) || step < 0) throw new Error(`lrFactor: step must be an integer >= 0, got ${step}`);
  const { type, warmupSteps: w, totalSteps: t } = schedule;
  if (type === 'constant') return 1;
  if (step < w) return step / Math.max(1, w);
  switch (type) {
    case 'constant_with_warmup':
      return 1;
    case 'linear':
      return Math.max(0, (t - step) / Math.max(1, t - w));
    case 'cosine': {
      const progress = (step - w) / Math.max(1, t - w);
      return Math.max(0, 0.5 * (1 + Math.cos(Math.PI * progress)));
    }
  }
}

/** The learning rate at `step`: `baseLr · λ(step)`. */
export function scheduledLr(baseLr: number, schedule: LrSchedule, step: number): number {
  return baseLr * lrFactor(schedule, step);
}

/** One setting a schedule would ignore: its key and why. */
export interface LrScheduleIssue {
  readonly key: string;
  /** The value given. */
  readonly value: number;
  readonly message: string;
}

const settingsSchema = z.object({
  lr_scheduler_type: z.enum(LR_SCHEDULER_TYPES).optional(),
  warmup_steps: z.number().optional(),
  warmup_ratio: z.number().optional(),
  critic_lr_scheduler_type: z.enum(LR_SCHEDULER_TYPES).nullable().optional(),
  critic_lr_warmup_steps: z.number().nullable().optional(),
  critic_lr_warmup_ratio: z.number().nullable().optional(),
});

/**
 * The warmup settings of a parsed trainer section that a `constant` schedule would ignore (HF
 * ignores them silently; comlrl refuses them, naming the key). Sections without schedule fields
 * have none.
 */
export function lrScheduleIssues(section: unknown): LrScheduleIssue[] {
  const parsed = settingsSchema.safeParse(section);
  if (!parsed.success) return [];
  const cfg = parsed.data;
  const issues: LrScheduleIssue[] = [];
  const ignored = (key: string, value: number | null | undefined, typeKey: string): void => {
    if (value != null && value > 0) {
      issues.push({ key, value, message: `${key} is ${value} but ${typeKey} is 'constant', which has no warmup; use 'constant_with_warmup', 'linear' or 'cosine', or remove ${key}` });
    }
  };
  const type = cfg.lr_scheduler_type ?? 'constant';
  if (type === 'constant') {
    ignored('warmup_steps', cfg.warmup_steps, 'lr_scheduler_type');
    ignored('warmup_ratio', cfg.warmup_ratio, 'lr_scheduler_type');
  }
  if ((cfg.critic_lr_scheduler_type ?? type) === 'constant') {
    const typeKey = cfg.critic_lr_scheduler_type != null ? 'critic_lr_scheduler_type' : 'lr_scheduler_type';
    ignored('critic_lr_warmup_steps', cfg.critic_lr_warmup_steps, typeKey);
    ignored('critic_lr_warmup_ratio', cfg.critic_lr_warmup_ratio, typeKey);
  }
  return issues;
}
