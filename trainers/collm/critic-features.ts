/**
 * Numeric m_t in CoLLM's critics (config `critic_global_features`, the paper's §4.1 m_t "in a
 * numerical representation"): the feature width the heads read, the checks that a trainer's heads
 * and a resumed buffer agree with it, and where the vectors sit in a transition's critic part.
 * CoLLMTrainer (trainer.ts) reads the vectors from the env at rollout and evaluation.
 */
import type { JointTransition } from '../../src/buffer/replay.js';
import { declaredGlobalFeatures } from '../../src/decpomdp/features.js';
import type { LLMDecPOMDP } from '../../src/decpomdp/types.js';
import type { ActorCriticConfig } from './config.js';
import type { CriticSet } from './critic-set.js';
import type { CriticPart } from './rollout.js';

/** The feature width every head reads: the env's declared size when `critic_global_features`, else 0 (refused by name when the env has none). */
export function criticFeatureSize<T, S>(label: string, config: ActorCriticConfig, env: LLMDecPOMDP<T, S>): number {
  if (config.critic_global_features !== true) return 0;
  if (env.globalFeatures === undefined) {
    throw new Error(`${label}: critic_global_features is true, but env '${env.name}' provides no globalFeatures (numeric m_t); give the env globalFeatures or leave critic_global_features off`);
  }
  return declaredGlobalFeatures(env).size;
}

/** Every head must read exactly `featureSize` features (a head given to resume: its checkpoint's). */
export function checkHeadFeatures(set: CriticSet, featureSize: number, label: string, envName: string): void {
  set.slots.forEach((slot, c) => {
    const reads = slot.model.featureSize;
    if (reads === featureSize) return;
    const wanted = featureSize > 0 ? `env '${envName}' declares ${featureSize} (critic_global_features: true)` : 'critic_global_features is off';
    throw new Error(`${label}: the value head of critic ${c} reads ${reads} global features, but ${wanted}; a saved head must have been trained with the same feature size`);
  });
}

/** m_t and m_{t+1} of turn t's critic part (when the heads read them), as stored in a transition. */
export function featureParts(turns: readonly { features: number[] | null }[], t: number): Pick<CriticPart, 'criticFeatures' | 'nextCriticFeatures'> {
  const features = turns[t].features;
  if (features === null) return {};
  return { criticFeatures: features, nextCriticFeatures: t + 1 < turns.length ? turns[t + 1].features : null };
}

/** A stored feature vector, which a head that reads features needs (`checkBufferedFeatures` refuses snapshots without). */
export function storedFeatures(features: readonly number[] | null | undefined): readonly number[] {
  if (!features) throw new Error('a buffered transition has no global features, but the critic heads read them');
  return features;
}

/** A resumed buffer must carry features exactly when the heads read them. */
export function checkBufferedFeatures(buffer: readonly JointTransition[], set: CriticSet, featureSize: number, label: string): void {
  for (const tr of buffer) {
    for (let c = 0; c < set.slots.length; c++) {
      const f = set.partOf(tr, c).criticFeatures;
      const has = f !== undefined;
      if (has === featureSize > 0 && (!has || f.length === featureSize)) continue;
      const holds = has ? `${f.length} global features` : 'no global features';
      throw new Error(`importState: a buffered transition (episode ${tr.episode}, turn ${tr.turn}) holds ${holds} for critic ${c}, but the heads read ${featureSize} (${label}, critic_global_features ${featureSize > 0 ? 'on' : 'off'}); resume with the config the snapshot was taken with`);
    }
  }
}
