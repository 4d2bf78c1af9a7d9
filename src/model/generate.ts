import * as tf from '@tensorflow/tfjs';
import { samplesOnDevice, tidyKeep } from '../backend/index.js';
import { sampleNextTokens, sampleNextTokensOnDevice } from '../sampling/index.js';
import type { Decoder, FrozenWeights, LayerCache } from './decoder.js';
import type { RotaryTables } from './rope.js';
import { GENERATION_YIELD_MS, type GenerationOutput, type SamplingOptions } from './types.js';

/** What the generation loop needs from a model. */
export interface GenerationModel {
  readonly decoder: Decoder;
  readonly rope: RotaryTables;
  readonly vocabSize: number;
  readonly eosTokenIds: readonly number[];
}

/** `cache`: one position per new token (KV cache); `recompute`: the whole sequence each step. */
export type GenerationMode = 'cache' | 'recompute';

function checkPrompts(promptIds: number[][], vocabSize: number): void {
  if (promptIds.length === 0) throw new Error('generate: promptIds is empty');
  promptIds.forEach((p, i) => {
    if (p.length === 0) throw new Error(`generate: promptIds[${i}] is empty (a prompt needs at least one token)`);
    for (const id of p) {
      if (!Number.isInteger(id) || id < 0 || id >= vocabSize) throw new Error(`generate: promptIds[${i}] has token ${id} outside [0, ${vocabSize})`);
    }
  });
}

/**
 * One left-padded forward pass over `ids` rows (each [padded width]), returning last-position
 * logits and, when asked, the layer caches.
 */
function prefill(
  model: GenerationModel,
  ids: number[][],
  /** Left padding of each row inside `ids`. */
  pads: readonly number[],
  keepCache: boolean,
  frozen: FrozenWeights,
  attentionBlockBytes: number | undefined,
): { logits: tf.Tensor2D; cache: LayerCache[] | null } {
  return tidyKeep(() => {
    const b = ids.length;
    const width = ids[0].length;
    const flat = new Int32Array(b * width);
    const positions: number[][] = [];
    for (let r = 0; r < b; r++) {
      flat.set(ids[r], r * width);
      positions.push(Array.from({ length: width }, (_, j) => Math.max(0, j - pads[r])));
    }
    const { cos, sin } = model.rope.tables(positions);
    const { hidden, cache } = model.decoder.forward(model.decoder.embed(flat), {
      batch: b,
      seqLen: width,
      cos,
      sin,
      mask: { pads },
      attentionBlockBytes,
      keepCache,
      frozen,
    });
    const last = tf.gather(hidden, Array.from({ length: b }, (_, r) => r * width + width - 1));
    return { logits: model.decoder.logits(last as tf.Tensor2D, frozen), cache };
  });
}

/** One cached step: a single new token per row at `positions[r]`, keys = cache + 1. */
function step(
  model: GenerationModel,
  tokens: number[],
  positions: number[],
  pads: number[],
  past: LayerCache[],
  frozen: FrozenWeights,
  attentionBlockBytes: number | undefined,
): { logits: tf.Tensor2D; cache: LayerCache[] } {
  return tidyKeep(() => {
    const b = tokens.length;
    const { cos, sin } = model.rope.tables(positions.map((p) => [p]));
    const { hidden, cache } = model.decoder.forward(model.decoder.embed(Int32Array.from(tokens)), {
      batch: b,
      seqLen: 1,
      cos,
      sin,
      mask: { pads },
      attentionBlockBytes,
      past,
      keepCache: true,
      frozen,
    });
    return { logits: model.decoder.logits(hidden, frozen), cache: cache as LayerCache[] };
  });
}

function disposeCache(cache: LayerCache[] | null): void {
  for (const c of cache ?? []) {
    c.kT.dispose();
    c.v.dispose();
  }
}

function selectRows(cache: LayerCache[], rows: number[]): LayerCache[] {
  return tf.tidy(() => cache.map((c) => ({ kT: tf.gather(c.kT, rows) as tf.Tensor4D, v: tf.gather(c.v, rows) as tf.Tensor4D })));
}

/** One group of a {@link generateGroups} call: its prompts and how they are sampled. */
export interface GenerationGroup {
  readonly promptIds: number[][];
  readonly options: SamplingOptions;
}

/**
 * Called before every forward pass of a grouped generation with the number of batch rows each
 * group has in it (rows are group-major): a joint pass of several LoRA agents routes each row
 * block through its own adapter (see `JointLoraPasses`).
 */
export type RowGroupsHook = (rowsPerGroup: readonly number[]) => void;

/**
 * Samples continuations of `promptIds`. Prompts are left-padded inside one batch with per-row
 * RoPE positions (a row's first real token is position 0) and pad keys masked. Each prompt is
 * prefilled once and its cache copied to its `numReturnSequences` samples. Rows that stop are
 * dropped from the batch. Log-probs come from the sampler (the distribution actually sampled).
 * `attentionBlockBytes` bounds one attention block's score buffers (default 64 MiB; a memory
 * plan's, see `planGeneration`).
 */
export async function generateSequences(
  model: GenerationModel,
  promptIds: number[][],
  options: SamplingOptions,
  mode: GenerationMode = 'cache',
  attentionBlockBytes?: number,
): Promise<GenerationOutput> {
  const [out] = await generateGroups(model, [{ promptIds, options }], mode, attentionBlockBytes);
  return out;
}

interface GroupPlan {
  readonly n: number;
  readonly maxNew: number;
  readonly stop: ReadonlySet<number>;
  readonly sampler: { greedy?: boolean; temperature?: number; topK?: number | null; topP?: number };
  readonly rng: SamplingOptions['rng'];
  /** First output row of the group. */
  readonly first: number;
}

function planGroup(g: GenerationGroup, vocabSize: number, first: number, modelEos: readonly number[]): GroupPlan {
  const { options } = g;
  checkPrompts(g.promptIds, vocabSize);
  const maxNew = options.maxNewTokens;
  if (!Number.isInteger(maxNew) || maxNew < 0) throw new Error(`generate: maxNewTokens must be an integer >= 0, got ${maxNew}`);
  const n = options.numReturnSequences ?? 1;
  if (!Number.isInteger(n) || n < 1) throw new Error(`generate: numReturnSequences must be an integer >= 1, got ${n}`);
  if (!options.greedy && !options.rng) throw new Error('generate: options.rng is required unless greedy is set');
  return {
    n,
    maxNew,
    stop: new Set<number>([...(options.eosTokenIds ?? modelEos), ...(options.stopTokenIds ?? [])]),
    sampler: { greedy: options.greedy, temperature: options.temperature, topK: options.topK, topP: options.topP },
    rng: options.rng,
    first,
  };
}

/**
 * {@link generateSequences} for several groups of prompts in one batch, each group with its own
 * sampling settings, length limit, stop ids and random stream: every forward pass runs over the
 * rows of all groups (group-major), and each group's tokens are drawn from its own rows' logits
 * with its own stream, so a group samples exactly what it would sample alone. `rowGroups` hears
 * the group sizes before each pass. Returns one output per group.
 */
export async function generateGroups(
  model: GenerationModel,
  groups: readonly GenerationGroup[],
  mode: GenerationMode = 'cache',
  attentionBlockBytes?: number,
  rowGroups?: RowGroupsHook,
): Promise<GenerationOutput[]> {
  if (groups.length === 0) return [];
  // Output rows: group-major, and within a group prompt-major (prompt p, sample j at p·n + j).
  const plans: GroupPlan[] = [];
  let rowCount = 0;
  for (const g of groups) {
    const plan = planGroup(g, model.vocabSize, rowCount, model.eosTokenIds);
    plans.push(plan);
    rowCount += g.promptIds.length * plan.n;
  }
  const total = rowCount;
  const sequences: number[][] = Array.from({ length: total }, () => []);
  const logProbs: number[][] = Array.from({ length: total }, () => []);
  const finished: boolean[] = new Array<boolean>(total).fill(false);
  const outputs = (): GenerationOutput[] =>
    groups.map((g, i) => {
      const a = plans[i].first;
      const b = a + g.promptIds.length * plans[i].n;
      return { sequences: sequences.slice(a, b), logProbs: logProbs.slice(a, b), finished: finished.slice(a, b) };
    });
  const maxNew = Math.max(...plans.map((p) => p.maxNew));
  if (maxNew === 0) return outputs();

  // Unique prompts of every group, in output order; output row r continues unique prompt expand[r].
  const unique: number[][] = [];
  const expand: number[] = [];
  const groupOf: number[] = [];
  groups.forEach((g, gi) => {
    const base = unique.length;
    unique.push(...g.promptIds);
    for (let p = 0; p < g.promptIds.length; p++) {
      for (let j = 0; j < plans[gi].n; j++) {
        expand.push(base + p);
        groupOf.push(gi);
      }
    }
  });
  const width = Math.max(...unique.map((p) => p.length));
  const uniquePads = unique.map((p) => width - p.length);
  const padded = unique.map((p, i) => [...new Array<number>(uniquePads[i]).fill(0), ...p]);
  // Rows that may draw a first token (a group with maxNew 0 takes none).
  let active = expand.map((_, r) => r).filter((r) => plans[groupOf[r]].maxNew > 0);
  let pads = active.map((r) => uniquePads[expand[r]]);
  const lens = expand.map((u) => unique[u].length);
  const sizes = (rows: readonly number[]) => {
    const c = new Array<number>(groups.length).fill(0);
    for (const r of rows) c[groupOf[r]]++;
    return c;
  };

  // Weights cannot change during one call: every pass reads them in place (nothing to free).
  const frozen = model.decoder.freeze();
  let cache: LayerCache[] | null = null;
  let logits: tf.Tensor2D | null = null;
  try {
    rowGroups?.(groups.map((g) => g.promptIds.length));
    const first = prefill(model, padded, uniquePads, mode === 'cache', frozen, attentionBlockBytes);
    const identity = active.length === unique.length && active.every((r, i) => expand[r] === i);
    const rowsOfActive = active.map((r) => expand[r]);
    logits = identity ? first.logits : tf.tidy(() => tf.gather(first.logits, rowsOfActive) as tf.Tensor2D);
    if (!identity) first.logits.dispose();
    if (first.cache) {
      cache = identity ? first.cache : selectRows(first.cache, rowsOfActive);
      if (!identity) disposeCache(first.cache);
    }
    const yieldEvery = Math.min(...groups.map((g) => g.options.yieldEveryMs ?? GENERATION_YIELD_MS));
    let ranAt = performance.now();
    for (let t = 0; t < maxNew; t++) {
      if (performance.now() - ranAt >= yieldEvery) {
        // A pending signal handler (Ctrl-C, SIGTERM) runs here, mid-generation.
        await new Promise<void>((resolve) => setImmediate(resolve));
        ranAt = performance.now();
      }
      const picks = await sampleByGroup(model, logits, sizes(active), plans);
      logits.dispose();
      const keep: number[] = [];
      active.forEach((row, i) => {
        const tok = picks.tokens[i];
        sequences[row].push(tok);
        logProbs[row].push(picks.logProbs[i]);
        const plan = plans[groupOf[row]];
        if (plan.stop.has(tok)) finished[row] = true;
        else if (sequences[row].length < plan.maxNew) keep.push(i);
      });
      if (keep.length === 0 || t === maxNew - 1) break;
      if (keep.length !== active.length) {
        if (cache) {
          const next = selectRows(cache, keep);
          disposeCache(cache);
          cache = next;
        }
        active = keep.map((i) => active[i]);
        pads = keep.map((i) => pads[i]);
      }
      rowGroups?.(sizes(active));
      if (mode === 'cache') {
        const out = step(
          model,
          active.map((row) => sequences[row][t]),
          active.map((row) => lens[row] + t),
          pads,
          cache as LayerCache[],
          frozen,
          attentionBlockBytes,
        );
        disposeCache(cache);
        cache = out.cache;
        logits = out.logits;
      } else {
        const ids = active.map((row) => [...padded[expand[row]], ...sequences[row]]);
        logits = prefill(model, ids, pads, false, frozen, attentionBlockBytes).logits;
      }
    }
  } finally {
    disposeCache(cache);
    if (logits && !logits.isDisposed) logits.dispose();
  }
  return outputs();
}

/**
 * Draws the next token of every active row: each group from its own block of rows with its own
 * settings and stream (one draw per row, in row order, as a lone group draws).
 */
async function sampleByGroup(
  model: GenerationModel,
  logits: tf.Tensor2D,
  counts: readonly number[],
  plans: readonly GroupPlan[],
): Promise<{ tokens: number[]; logProbs: number[] }> {
  const tokens: number[] = [];
  const lps: number[] = [];
  const onDevice = samplesOnDevice();
  const host = onDevice ? null : ((await logits.data()) as Float32Array);
  let offset = 0;
  for (let g = 0; g < plans.length; g++) {
    const rows = counts[g];
    if (rows === 0) continue;
    const whole = rows === logits.shape[0];
    let pick: { tokens: ArrayLike<number>; logProbs: ArrayLike<number> };
    if (onDevice) {
      const block = whole ? logits : (tf.slice(logits, [offset, 0], [rows, model.vocabSize]) as tf.Tensor2D);
      try {
        pick = await sampleNextTokensOnDevice(block, plans[g].sampler, plans[g].rng);
      } finally {
        if (!whole) block.dispose();
      }
    } else {
      const v = model.vocabSize;
      const block = whole ? (host as Float32Array) : (host as Float32Array).subarray(offset * v, (offset + rows) * v);
      pick = sampleNextTokens(block, v, plans[g].sampler, plans[g].rng);
    }
    for (let i = 0; i < rows; i++) {
      tokens.push(pick.tokens[i]);
      lps.push(pick.logProbs[i]);
    }
    offset += rows;
  }
  return { tokens, logProbs: lps };
}
