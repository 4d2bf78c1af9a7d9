/**
 * The fields every trainer section shares once its schema parsed it, and the types of CoMLRL's
 * parallelism keys among them: a leaf module, so the config modules that read a section
 * (./trainers.ts, ./roles.ts, ./devices.ts) need not import each other.
 */

/** CoMLRL's `parallel_training` values (its null is read as none). */
export const PARALLEL_TRAINING_MODES = ['none', 'mp'] as const;
/** See {@link PARALLEL_TRAINING_MODES}. */
export type ParallelTraining = (typeof PARALLEL_TRAINING_MODES)[number];

/** A device key's value as the section schema parsed it: one device, a list, null or absent. */
export type DeviceSpec = string | readonly string[] | null | undefined;

/**
 * The fields every trainer section has once its schema parsed it: what the CLI, `eval` and the
 * config reader use of any trainer's section (a trainer's schema may add any others).
 */
export type TrainerSectionFields = {
  readonly num_agents?: number | undefined;
  readonly num_turns: number;
  readonly num_train_epochs: number;
  readonly max_new_tokens: number;
  readonly temperature: number;
  readonly top_p: number;
  /** 0 = off; null = the agent checkpoint's generation_config.json value, else 50 (CoMLRL's None). */
  readonly top_k: number | null;
  readonly discount: number;
  readonly eval_interval: number;
  readonly eval_num_samples: number;
  readonly eval_batch_size: number;
  readonly seed: number;
  /** Reference KL on (trainers that offer it; see `REFERENCE_KL_DEFAULTS`). */
  readonly reference_kl_enabled?: boolean;
  /** CoMLRL's parallel mode and role devices (./devices.ts); absent: none, the run's device. */
  readonly parallel_training?: ParallelTraining | undefined;
  readonly agent_devices?: DeviceSpec;
  readonly critic_devices?: DeviceSpec;
  readonly reference_devices?: DeviceSpec;
};
