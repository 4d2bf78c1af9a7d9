/**
 * Which temperature, top-p and top-k a sampled generation runs with when a setting is left unset:
 * the checkpoint's generation_config.json first, then transformers' own defaults — the order
 * Hugging Face `generate()` uses, which is what CoMLRL's `top_k: None` relies on (CoMLRL leaves
 * `top_k` out of `generate()` when it is None). See docs/sampling.md.
 */
import { z } from 'zod';

/**
 * transformers' fallbacks for a value neither the caller nor the checkpoint sets
 * (`GenerationConfig._get_default_generation_params()` in transformers 5.x: temperature 1.0,
 * top_k 50, top_p 1.0). A top-k of 0 and a top-p of 1 are no filter; temperature 1 leaves the
 * logits as they are.
 */
export const TRANSFORMERS_SAMPLING_DEFAULTS = { temperature: 1, topK: 50, topP: 1 } as const;

/** The sampling fields of a checkpoint's generation_config.json (each absent when the file does not set it). */
export interface CheckpointSampling {
  /** The file they were read from, named in messages. */
  readonly file: string;
  readonly temperature?: number;
  readonly topK?: number;
  readonly topP?: number;
}

const num = (field: string) => z.number({ error: `field '${field}' must be a number or null` }).nullable().optional();
const generationSamplingSchema = z.looseObject({ temperature: num('temperature'), top_k: num('top_k'), top_p: num('top_p') });

/**
 * Reads temperature, top_k and top_p out of a parsed generation_config.json. A field that is
 * missing or null is unset (transformers treats both alike); a field of another type is an error
 * naming `file`. Ranges are checked where a value is used ({@link resolveSampling}), so a
 * checkpoint whose value a run overrides still loads.
 */
export function parseGenerationSampling(raw: unknown, file = 'generation_config.json'): CheckpointSampling {
  const parsed = generationSamplingSchema.safeParse(raw);
  if (!parsed.success) throw new Error(parsed.error.issues.map((i) => `${file}: ${i.message}`).join('; '));
  const g = parsed.data;
  return {
    file,
    ...(g.temperature != null ? { temperature: g.temperature } : {}),
    ...(g.top_k != null ? { topK: g.top_k } : {}),
    ...(g.top_p != null ? { topP: g.top_p } : {}),
  };
}

/** Where a resolved value came from. */
export type SamplingSource = 'config' | 'checkpoint' | 'transformers';

/** Sampling values as a config gives them: null or undefined = unset (then the checkpoint's, else transformers'). */
export interface RequestedSampling {
  readonly temperature?: number | null;
  readonly topP?: number | null;
  /** 0 = no top-k filter; null/undefined = unset, as CoMLRL's `top_k: None`. */
  readonly topK?: number | null;
}

/** The values a sampled generation runs with, and where each came from. */
export interface ResolvedSampling {
  readonly temperature: number;
  readonly topP: number;
  /** 0 when top-k is off. */
  readonly topK: number;
  readonly sources: { readonly temperature: SamplingSource; readonly topP: SamplingSource; readonly topK: SamplingSource };
}

type Field = 'temperature' | 'topP' | 'topK';
const KEYS: Record<Field, string> = { temperature: 'temperature', topP: 'top_p', topK: 'top_k' };

function valid(field: Field, v: number): boolean {
  if (!Number.isFinite(v)) return false;
  if (field === 'temperature') return v > 0;
  if (field === 'topP') return v > 0 && v <= 1;
  return Number.isInteger(v) && v >= 0;
}

const RANGE: Record<Field, string> = { temperature: 'a number > 0', topP: 'a number in (0, 1]', topK: 'an integer >= 0 (0 = off)' };

/**
 * Fills each unset value as transformers' `generate()` does: the checkpoint's
 * generation_config.json value, else {@link TRANSFORMERS_SAMPLING_DEFAULTS}. A value given in
 * `requested` always wins, so `topK: 0` turns top-k off whatever the checkpoint says.
 *
 * @param checkpoint - the agent's generation_config.json fields; null when it has none.
 * @throws when a value that would be used is out of range, naming the config key or the file.
 */
export function resolveSampling(requested: RequestedSampling, checkpoint: CheckpointSampling | null): ResolvedSampling {
  const pick = (field: Field): { value: number; source: SamplingSource } => {
    const given = requested[field];
    if (given !== null && given !== undefined) {
      if (!valid(field, given)) throw new Error(`${KEYS[field]} must be ${RANGE[field]}, got ${given}`);
      return { value: given, source: 'config' };
    }
    const fromFile = checkpoint?.[field];
    if (fromFile !== undefined) {
      if (!valid(field, fromFile)) {
        throw new Error(`${checkpoint!.file}: ${KEYS[field]} ${fromFile} is not ${RANGE[field]}; set ${KEYS[field]} in the config to override it`);
      }
      return { value: fromFile, source: 'checkpoint' };
    }
    return { value: TRANSFORMERS_SAMPLING_DEFAULTS[field], source: 'transformers' };
  };
  const temperature = pick('temperature');
  const topP = pick('topP');
  const topK = pick('topK');
  return {
    temperature: temperature.value,
    topP: topP.value,
    topK: topK.value,
    sources: { temperature: temperature.source, topP: topP.source, topK: topK.source },
  };
}

const SOURCE_NOTE: Record<SamplingSource, string> = {
  config: '',
  checkpoint: ' (generation_config.json)',
  transformers: " (transformers' default)",
};

/** One line for logs, e.g. `temperature 0.6 · top_p 0.6 · top_k 50 (transformers' default)`. */
export function describeSampling(s: ResolvedSampling): string {
  const topK = s.topK === 0 ? 'off' : String(s.topK);
  return [
    `temperature ${s.temperature}${SOURCE_NOTE[s.sources.temperature]}`,
    `top_p ${s.topP}${SOURCE_NOTE[s.sources.topP]}`,
    `top_k ${topK}${SOURCE_NOTE[s.sources.topK]}`,
  ].join(' · ');
}
