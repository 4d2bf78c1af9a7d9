/** MARLHF's one entry: the trainer class of `rl_algorithm` (CoMLRL's phase-2 dispatch). */
import { MARLHFActorCriticTrainer, type MARLHFActorCriticTrainerOptions } from './actor-critic.js';
import { isActorCriticAlgorithm, parseMARLHFConfig } from './config.js';
import { MARLHFTrainer } from './trainer.js';

/** Options of {@link createMARLHFTrainer}: a MAGRPO-family run's, plus the critics a maac / iac run needs. */
export type CreateMARLHFTrainerOptions<T, S> = MARLHFActorCriticTrainerOptions<T, S>;

/**
 * A MARLHF trainer for `config.rl_algorithm`: {@link MARLHFTrainer} (magrpo, mareinforce, maremax,
 * marloo: MAGRPO's update) or {@link MARLHFActorCriticTrainer} (maac, iac: CoLLM's update, with
 * `critic` / `critics`). Critics given to a MAGRPO-family run are an error: they would not train.
 */
export function createMARLHFTrainer<T, S>(options: CreateMARLHFTrainerOptions<T, S>): MARLHFTrainer<T, S> | MARLHFActorCriticTrainer<T, S> {
  const { rl_algorithm } = parseMARLHFConfig(options.config ?? {});
  if (isActorCriticAlgorithm(rl_algorithm)) return new MARLHFActorCriticTrainer(options);
  const { critic, criticHead, critics, criticHeads, actorCritic, ...rest } = options;
  const given = Object.entries({ critic, criticHead, critics, criticHeads, actorCritic }).filter(([, v]) => v !== undefined && !(Array.isArray(v) && v.length === 0));
  if (given.length > 0) {
    throw new Error(`createMARLHFTrainer: ${given.map(([k]) => k).join(', ')} given, but rl_algorithm '${rl_algorithm}' trains phase 2 with MAGRPO's update, which has no critics; set rl_algorithm: maac or iac, or drop them`);
  }
  return new MARLHFTrainer(rest);
}
