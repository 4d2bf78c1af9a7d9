import seedrandom from 'seedrandom';

/** Serializable state of a seeded stream (seedrandom's ARC4 state). */
export type RngState = { readonly kind: 'arc4'; readonly state: { i: number; j: number; S: number[] } };

/**
 * A seeded random stream. One stream per purpose (sampling, init, minibatch order, env) so that a
 * change in how much one purpose draws does not shift the others.
 */
export interface Rng {
  /** Uniform in [0, 1). */
  next(): number;
  /** Integer in [0, n). */
  int(n: number): number;
  /** Standard normal draw (Box–Muller). */
  normal(): number;
  /** In-place Fisher–Yates shuffle; returns the same array. */
  shuffle<T>(items: T[]): T[];
  /** A snapshot that `restore` (or `createRng(seed, state)`) resumes exactly. */
  state(): RngState;
}

/** The purposes that get their own stream; derived seeds are `${seed}:${purpose}`. */
export type RngPurpose = 'sampling' | 'init' | 'minibatch' | 'env' | 'eval' | string;

/** Creates a seeded stream, optionally resumed from a saved state. */
export function createRng(seed: number | string, resume?: RngState): Rng {
  const prng = resume
    ? seedrandom('', { state: resume.state as seedrandom.State.Arc4 })
    : seedrandom(String(seed), { state: true });
  const rng: Rng = {
    next: () => prng.quick(),
    int: (n) => Math.floor(prng.quick() * n),
    // One normal per two uniforms (no cached spare) so a state snapshot resumes exactly.
    normal: () => {
      let u = 0;
      while (u === 0) u = prng.quick();
      const v = prng.quick();
      return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
    },
    shuffle: (items) => {
      for (let i = items.length - 1; i > 0; i--) {
        const j = Math.floor(prng.quick() * (i + 1));
        const t = items[i];
        items[i] = items[j];
        items[j] = t;
      }
      return items;
    },
    state: () => ({ kind: 'arc4', state: prng.state() as RngState['state'] }),
  };
  return rng;
}

/** A stream for one purpose derived from a run seed. */
export function rngFor(seed: number, purpose: RngPurpose): Rng {
  return createRng(`${seed}:${purpose}`);
}
