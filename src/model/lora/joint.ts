/**
 * Joint passes of LoRA agents on one frozen base: the base's products run once over the rows of
 * every agent (stacked agent by agent), and each block of rows adds its own agent's LoRA delta.
 * Decoding is bound by per-kernel cost and by reading the weights, so one pass over 2·B rows costs
 * little more than one over B. The tokens, log-probs and gradients are each agent's own: no agent's
 * rows reach another's adapter (attention is per row, every other op is per position).
 */
import * as tf from '@tensorflow/tfjs';
import type { MicroBatchPlan, RowSize } from '../../memory/plan.js';
import type { PassMemory } from '../../memory/settings.js';
import { scoreCompletionsOf, TfCausalLM, type PassModel } from '../causal-lm.js';
import { Decoder, type LoraDelta } from '../decoder.js';
import { generateGroups, type GenerationGroup } from '../generate.js';
import type { RotaryTables } from '../rope.js';
import type { CausalLM, CompletionScores, GenerationOutput, PassPlanOptions } from '../types.js';
import type { LoraAdapter } from './adapter.js';

/**
 * The LoRA delta of a joint pass: the pass's batch rows are in blocks, one per adapter (counts set
 * before each pass with {@link GroupedLoraDelta.setRows}); block i gets adapter i's delta.
 */
export class GroupedLoraDelta implements LoraDelta {
  private rows: number[];

  constructor(private readonly adapters: readonly LoraAdapter[]) {
    this.rows = adapters.map(() => 0);
  }

  /** Batch rows of each adapter in the next passes (adapter order); every position of a row is in its block. */
  setRows(rows: readonly number[]): void {
    if (rows.length !== this.adapters.length) throw new Error(`joint pass: ${rows.length} row counts for ${this.adapters.length} adapters`);
    this.rows = [...rows];
  }

  delta(weightName: string, x: tf.Tensor2D): tf.Tensor2D | null {
    const total = this.rows.reduce((a, b) => a + b, 0);
    const perRow = total > 0 ? x.shape[0] / total : NaN;
    if (!Number.isInteger(perRow)) throw new Error(`joint pass: ${x.shape[0]} positions do not split into ${total} rows`);
    const parts: (tf.Tensor2D | null)[] = [];
    const sizes: number[] = [];
    let offset = 0;
    for (let i = 0; i < this.adapters.length; i++) {
      const n = this.rows[i] * perRow;
      if (n === 0) continue;
      const block = n === x.shape[0] ? x : (tf.slice(x, [offset, 0], [n, x.shape[1]]) as tf.Tensor2D);
      parts.push(this.adapters[i].delta(weightName, block));
      sizes.push(n);
      offset += n;
    }
    const some = parts.find((p) => p !== null);
    if (!some) return null;
    if (parts.length === 1) return some;
    // An adapter that does not target this module adds nothing to its rows.
    const filled = parts.map((p, i) => p ?? (tf.zeros([sizes[i], some.shape[1]]) as tf.Tensor2D));
    return tf.concat(filled, 0) as tf.Tensor2D;
  }

  layerVariables(l: number): tf.Variable[] {
    return this.adapters.flatMap((a) => a.layerVariables(l));
  }

  beginPass(): void {
    for (const a of this.adapters) a.beginPass();
  }

  /** Joint passes under a tape run only without dropout (see {@link JointLoraPasses.trainable}): no mask stream to replay. */
  get dropoutPasses(): number {
    return 0;
  }

  set dropoutPasses(_: number) {
    // Nothing to replay (see the getter).
  }
}

/** One agent's completions to score in a joint pass. */
export interface JointScoringGroup {
  readonly promptIds: number[][];
  readonly completionIds: number[][];
}

/** The model of agent `agent` and its row `row`, in a joint pass's agent-major row order. */
export interface JointRow {
  readonly agent: number;
  readonly row: number;
}

/**
 * Joint passes over several LoRA models that share one frozen base (see {@link JointLoraPasses.of}):
 * generation, scoring and differentiable scoring, each with the rows of every model in one batch.
 * It owns no tensors: the models keep their adapters and base.
 */
export class JointLoraPasses implements PassModel {
  readonly decoder: Decoder;
  readonly rope: RotaryTables;
  readonly vocabSize: number;
  readonly eosTokenIds: readonly number[];
  private readonly delta: GroupedLoraDelta;

  private constructor(readonly models: readonly TfCausalLM[]) {
    const first = models[0];
    const lora = first.lora!;
    this.delta = new GroupedLoraDelta(models.map((m) => m.lora!.adapter));
    this.decoder = new Decoder(first.decoderConfig, lora.base.plain, { frozenLinear: lora.base.linear, lora: this.delta });
    this.rope = first.rope;
    this.vocabSize = first.vocabSize;
    this.eosTokenIds = first.eosTokenIds;
  }

  /**
   * Joint passes for `models` when at least two of them are LoRA models on one and the same frozen
   * base (the same loaded base object: same checkpoint and load options), else null.
   */
  static of(models: readonly CausalLM[]): JointLoraPasses | null {
    if (models.length < 2) return null;
    const tf0 = models[0];
    if (!(tf0 instanceof TfCausalLM) || !tf0.lora) return null;
    for (const m of models) {
      if (!(m instanceof TfCausalLM) || !m.lora || m.lora.base !== tf0.lora.base) return null;
    }
    return new JointLoraPasses(models as readonly TfCausalLM[]);
  }

  /**
   * Whether passes under a gradient tape may run jointly: no adapter uses dropout (its masks depend
   * on the pass's shape, which differs from a lone pass's, so the update would not be the same).
   */
  get trainable(): boolean {
    return this.models.every((m) => m.lora!.adapter.settings.loraDropout === 0);
  }

  /** Every model's trainable variables (its adapter's), model by model. */
  trainableVariables(): tf.Variable[] {
    return this.models.flatMap((m) => m.trainableVariables());
  }

  /** Plans joint passes with the first model's memory settings (the models share their base and shapes). */
  planPasses<R>(rows: readonly R[], sizeOf: (row: R) => RowSize, options: PassPlanOptions): MicroBatchPlan<R> {
    return this.models[0].planPasses(rows, sizeOf, options);
  }

  /**
   * Samples each model's continuations of its prompts with its own settings and random stream, in
   * one batch: the outputs equal each model's own `generate` with the same options. When all rows
   * together do not fit the memory budget, each model generates alone instead.
   */
  async generate(requests: readonly GenerationGroup[]): Promise<GenerationOutput[]> {
    if (requests.length !== this.models.length) throw new Error(`joint generate: ${requests.length} requests for ${this.models.length} models`);
    const total = requests.reduce((a, r) => a + r.promptIds.length * (r.options.numReturnSequences ?? 1), 0);
    const width = Math.max(1, ...requests.flatMap((r) => r.promptIds.map((p) => p.length)));
    const maxNew = Math.max(0, ...requests.map((r) => r.options.maxNewTokens));
    const first = this.models[0];
    const plan = first.generationPlan(total, width, maxNew);
    if (plan.batchSize < total) {
      const out: GenerationOutput[] = [];
      for (let i = 0; i < requests.length; i++) out.push(await this.models[i].generate(requests[i].promptIds, requests[i].options));
      return out;
    }
    return generateGroups(this, requests, 'cache', plan.attentionBlockBytes, (rows) => this.delta.setRows(rows));
  }

  /**
   * Differentiable teacher-forced scores of every model's completions in one pass (use under
   * `tf.variableGrads` / `tf.tidy`); group i's scores are shaped as model i's own
   * `scoreCompletions` would shape them ([rows, its longest completion]).
   * @throws Error under a gradient tape when an adapter uses dropout (see {@link JointLoraPasses.trainable}).
   */
  scoreCompletions(groups: readonly JointScoringGroup[], pass: PassMemory): CompletionScores[] {
    if (groups.length !== this.models.length) throw new Error(`joint scoring: ${groups.length} groups for ${this.models.length} models`);
    if (tf.engine().state.gradientDepth > 0 && !this.trainable) {
      throw new Error('joint scoring: an adapter uses lora_dropout, so its training passes must run alone (joint_passes: false)');
    }
    const counts = groups.map((g) => g.promptIds.length);
    this.delta.setRows(counts);
    const all = scoreCompletionsOf(
      this,
      groups.flatMap((g) => g.promptIds),
      groups.flatMap((g) => g.completionIds),
      pass,
    );
    if (groups.length === 1) return [all];
    const out: CompletionScores[] = [];
    let offset = 0;
    for (let i = 0; i < groups.length; i++) {
      const n = counts[i];
      const width = Math.max(0, ...groups[i].completionIds.map((c) => c.length));
      out.push({
        tokenLogProbs: tf.slice(all.tokenLogProbs, [offset, 0], [n, width]) as tf.Tensor2D,
        mask: tf.slice(all.mask, [offset, 0], [n, width]) as tf.Tensor2D,
      });
      offset += n;
    }
    all.tokenLogProbs.dispose();
    all.mask.dispose();
    return out;
  }

  /**
   * Teacher-forced log p of every completion token of every group (no tape), in micro-batches that
   * fit the memory budget, each over consecutive rows of the agent-major order.
   */
  async tokenLogProbs(groups: readonly JointScoringGroup[]): Promise<number[][][]> {
    const order: JointRow[] = groups.flatMap((g, agent) => g.promptIds.map((_, row) => ({ agent, row })));
    const plan = this.planPasses(
      order,
      ({ agent, row }) => ({ width: groups[agent].promptIds[row].length + groups[agent].completionIds[row].length, scored: groups[agent].completionIds[row].length }),
      { label: 'joint scoring', backward: false },
    );
    const out: number[][][] = groups.map(() => []);
    for (const batch of plan.batches) {
      const parts: JointScoringGroup[] = groups.map((g, agent) => {
        const rows = batch.filter((r) => r.agent === agent).map((r) => r.row);
        return { promptIds: rows.map((r) => g.promptIds[r]), completionIds: rows.map((r) => g.completionIds[r]) };
      });
      const scores = tf.tidy(() => this.scoreCompletions(parts, plan.pass).map((s) => s.tokenLogProbs));
      for (let agent = 0; agent < groups.length; agent++) {
        const t = scores[agent];
        const width = t.shape[1];
        const data = await t.data();
        parts[agent].completionIds.forEach((c, r) => out[agent].push(Array.from(data.subarray(r * width, r * width + c.length))));
      }
      tf.dispose(scores);
    }
    return out;
  }
}
