/**
 * The boundary check of numeric m_t ({@link GlobalFeatures}): an environment's declaration (a
 * size ≥ 1, names matching it) and every vector it returns (that length, finite entries). A
 * critic head multiplies these numbers into its value, so a wrong length or a NaN is refused here,
 * naming the environment and the entry, rather than surfacing as a shape error or a NaN loss.
 */
import type { GlobalFeatures, LLMDecPOMDP } from './types.js';

/** A bad global-feature declaration or vector; the message names the environment and the entry. */
export class GlobalFeaturesError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GlobalFeaturesError';
  }
}

/** Label of entry `i` in messages: its index and, when declared, its name. */
function entryLabel(features: GlobalFeatures<unknown>, i: number): string {
  const name = features.names?.[i];
  return name === undefined ? `entry ${i}` : `entry ${i} ('${name}')`;
}

/**
 * The environment's declared global features, checked: `size` an integer ≥ 1 and `names` (when
 * given) of that length. Throws {@link GlobalFeaturesError} when the environment declares none.
 */
export function declaredGlobalFeatures<T, S>(env: LLMDecPOMDP<T, S>): GlobalFeatures<S> {
  const features = env.globalFeatures;
  if (features === undefined) throw new GlobalFeaturesError(`env '${env.name}' provides no globalFeatures (numeric m_t)`);
  if (!Number.isInteger(features.size) || features.size < 1) {
    throw new GlobalFeaturesError(`env '${env.name}': globalFeatures.size must be an integer >= 1, got ${String(features.size)}`);
  }
  if (features.names !== undefined && features.names.length !== features.size) {
    throw new GlobalFeaturesError(`env '${env.name}': globalFeatures declares size ${features.size} but ${features.names.length} names`);
  }
  return features;
}

/**
 * m_t of `state` as numbers: the environment's vector, checked against its declaration (length
 * `size`, every entry finite) and copied. Throws {@link GlobalFeaturesError} naming the env and
 * the entry.
 */
export function globalFeaturesOf<T, S>(env: LLMDecPOMDP<T, S>, state: S): number[] {
  const features = declaredGlobalFeatures(env);
  const v = features.of(state);
  if (!Array.isArray(v) || v.length !== features.size) {
    const got = Array.isArray(v) ? `${v.length} entries` : typeof v;
    throw new GlobalFeaturesError(`env '${env.name}': globalFeatures.of returned ${got}, declared size ${features.size}`);
  }
  return v.map((x: unknown, i) => {
    if (typeof x !== 'number' || !Number.isFinite(x)) {
      throw new GlobalFeaturesError(`env '${env.name}': global feature ${entryLabel(features as GlobalFeatures<unknown>, i)} is ${String(x)} (need a finite number)`);
    }
    return x;
  });
}
