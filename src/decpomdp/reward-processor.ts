/** A float → float map applied to every raw reward (CoMLRL's `reward_processor`). */
export type RewardProcessor = (reward: number) => number;

/**
 * The papers' processor: `reward · scale + shift` (shift composed after scale, as the Writing and
 * Minecraft scripts do; CoopHE's −4 is a pure shift).
 */
export function scaleShift(options: { scale?: number; shift?: number }): RewardProcessor {
  const scale = options.scale ?? 1;
  const shift = options.shift ?? 0;
  return (r) => r * scale + shift;
}
