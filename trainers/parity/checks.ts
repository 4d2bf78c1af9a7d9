/**
 * The comparisons of one parity case: what comlrl's update computed (the recording) against what
 * CoMLRL recorded (the vector), quantity by quantity. Rows are matched by content (prompt and
 * completion ids, critic inputs), never by position alone, so a different order of the same work
 * compares equal and a different piece of work shows as a problem.
 */
import type { CriticEstimatesEvent, CriticStepEvent, GroupAdvantageEvent, PolicyStepEvent } from '../core/trace.js';
import { TOLERANCES, type Comparison } from './compare.js';
import type { Recording, ScoredRow } from './recording.js';
import type { TrainerVector } from './vector.js';

const key = (prompt: readonly number[], completion: readonly number[]) => `${prompt.join(',')}|${completion.join(',')}`;
const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);
const l2 = (xs: ArrayLike<number>) => {
  let s = 0;
  for (let i = 0; i < xs.length; i++) s += xs[i] * xs[i];
  return Math.sqrt(s);
};

/** Takes the first not yet used scored row of `label` with this prompt and completion. */
function takeScored(rec: Recording, used: Set<ScoredRow>, label: string, prompt: readonly number[], completion: readonly number[]): ScoredRow | null {
  const k = key(prompt, completion);
  const row = (rec.scored.get(label) ?? []).find((r) => !used.has(r) && key(r.promptIds, r.completionIds) === k) ?? null;
  if (row) used.add(row);
  return row;
}

/** The scored tokens and their log-probs of one completion CoMLRL scored. */
function compareScored(cmp: Comparison, rec: Recording, used: Set<ScoredRow>, label: string, where: string, prompt: readonly number[], scoredIds: readonly number[], lps: readonly number[], lpSum: number): number[] | null {
  const row = takeScored(rec, used, label, prompt, scoredIds);
  if (!row) {
    const scoredHere = (rec.scored.get(label) ?? []).filter((r) => key(r.promptIds, []) === key(prompt, []));
    cmp.problem('scored tokens', `${where}: CoMLRL scored ${JSON.stringify(scoredIds)}; comlrl's rows for that prompt: ${JSON.stringify(scoredHere.map((r) => r.completionIds))}`);
    return null;
  }
  cmp.same('scored tokens', where, scoredIds, row.completionIds);
  cmp.values('token log-probs', where, lps, row.tokenLogProbs, TOLERANCES.tokenLogProb);
  cmp.values('log-prob sums', where, [lpSum], [sum(row.tokenLogProbs)], TOLERANCES.logProbSum);
  return row.tokenLogProbs;
}

/** MAGRPO: the node returns and advantages, the scored tokens, log-probs and losses of every node's loss. */
export function compareMagrpo(vector: TrainerVector, rec: Recording, cmp: Comparison): void {
  const m = vector.magrpo;
  if (!m) return;
  const groups = rec.trace.filter((e): e is GroupAdvantageEvent => e.kind === 'group_advantages');
  const usedGroups = new Set<GroupAdvantageEvent>();
  const usedRows = new Set<ScoredRow>();
  for (const loss of m.losses) {
    const agent = Number(loss.model.replace('agent', ''));
    const node = m.nodes.find((n) => n.turn === loss.turn && n.node_env_step === loss.node_env_step);
    const where = `${loss.model} turn ${loss.turn + 1} node@${loss.node_env_step}`;
    const prompt = node?.agents[agent]?.prompt_ids;
    if (!prompt) {
      cmp.problem('node returns', `${where}: the vector has no node for this loss`);
      continue;
    }
    const g = groups.find((e) => !usedGroups.has(e) && e.agent === agent && e.turn === loss.turn && key(e.promptIds, []) === key(prompt, []));
    if (!g) {
      cmp.problem('node returns', `${where}: comlrl never trained agent ${agent} on this node`);
      continue;
    }
    usedGroups.add(g);
    cmp.values('node returns', where, loss.returns, g.returns, TOLERANCES.estimate);
    cmp.values('advantages before normalization', where, loss.advantages_before_normalization, g.advantagesRaw, TOLERANCES.estimate);
    cmp.values('advantages', where, loss.advantages, g.advantages, TOLERANCES.estimate);
    const terms: number[] = [];
    loss.completions.forEach((c, j) => {
      cmp.same('scored tokens', `${where} completion ${j} (loss rows)`, c.scored_token_ids, g.completionIds[j] ?? []);
      const lps = compareScored(cmp, rec, usedRows, loss.model, `${where} completion ${j}`, prompt, c.scored_token_ids, c.token_logprobs, c.logprob_sum);
      if (lps) {
        const term = -sum(lps) * g.advantages[j];
        terms.push(term);
        cmp.values('loss terms', `${where} completion ${j}`, [c.loss_term], [term], TOLERANCES.loss);
      }
    });
    if (terms.length === loss.completions.length) cmp.values('node losses', where, [loss.loss], [sum(terms) / terms.length], TOLERANCES.loss);
  }
  const extra = groups.filter((g) => !usedGroups.has(g));
  for (const g of extra) cmp.problem('node returns', `comlrl trained agent ${g.agent} on a turn-${g.turn + 1} node CoMLRL did not train on`);
}

/** CoLLM-DC / CoLLM-CC: rollout values, targets, advantages, and each actor-critic step. */
export function compareAc(vector: TrainerVector, rec: Recording, cmp: Comparison): void {
  const ac = vector.ac;
  if (!ac) return;
  const centralized = vector.trainer === 'MAACTrainer';
  const estimates = rec.trace.filter((e): e is CriticEstimatesEvent => e.kind === 'critic_estimates');
  const numSlots = centralized ? 1 : Math.max(...ac.samples.map((s) => s.agent)) + 1;
  for (let slot = 0; slot < numSlots; slot++) {
    const e = estimates.find((x) => x.slot === slot);
    const agents = centralized ? [...new Set(ac.samples.map((s) => s.agent))] : [slot];
    for (const agent of agents) {
      const where = centralized ? `critic, agent ${agent}'s samples` : `critic${slot}`;
      const samples = ac.samples.filter((s) => s.agent === agent).sort((a, b) => a.turn - b.turn || a.generation - b.generation);
      if (!e) {
        cmp.problem('critic values at rollout', `${where}: comlrl computed no estimates`);
        continue;
      }
      cmp.values('critic values at rollout', where, samples.map((s) => s.old_value), e.values, TOLERANCES.estimate);
      cmp.values('TD targets', where, samples.map((s) => s.value_target), e.targets, TOLERANCES.estimate);
      const adv = new Map(ac.updates.filter((u) => u.agent === agent).flatMap((u) => u.advantages.map((a) => [a.sample, a] as const)));
      cmp.values('advantages before normalization', where, samples.map((s) => adv.get(s.sample)?.advantage ?? NaN), e.advantagesRaw, TOLERANCES.estimate);
      cmp.values('advantages', where, samples.map((s) => adv.get(s.sample)?.normalized_advantage ?? NaN), e.advantages, TOLERANCES.estimate);
    }
  }

  const policySteps = rec.trace.filter((e): e is PolicyStepEvent => e.kind === 'policy_step');
  const criticSteps = rec.trace.filter((e): e is CriticStepEvent => e.kind === 'critic_step');
  if (policySteps.length !== ac.ac_steps.length) cmp.problem('actor losses', `comlrl took ${policySteps.length} actor steps, CoMLRL ${ac.ac_steps.length}`);
  if (criticSteps.length !== ac.ac_steps.length) cmp.problem('value losses', `comlrl took ${criticSteps.length} critic steps, CoMLRL ${ac.ac_steps.length}`);
  const usedRows = new Set<ScoredRow>();
  const byId = new Map(ac.samples.map((s) => [s.sample, s]));
  ac.ac_steps.forEach((step, k) => {
    const where = step.phase;
    const label = `agent${step.agent}`;
    const terms: number[] = [];
    for (const s of step.samples_in_step_order) {
      const sample = byId.get(s.sample);
      if (!sample) continue;
      const lps = compareScored(cmp, rec, usedRows, label, `${where} sample ${s.sample}`, sample.full_input_ids.slice(0, sample.prompt_len), s.scored_token_ids, s.token_logprobs, s.logprob_sum);
      if (lps) terms.push(-sum(lps) * s.normalized_advantage);
    }
    const p = policySteps[k];
    if (p && p.agent !== step.agent) cmp.problem('actor losses', `${where}: comlrl's step ${k} trained agent ${p.agent}`);
    else if (p) cmp.values('actor losses', where, [step.actor_loss], [p.loss], TOLERANCES.loss);
    const c = criticSteps[k];
    if (!c) return;
    // Samples of one turn can share a critic input (CoLLM-CC's joint prompt): among comlrl's rows
    // with the same input, each CoMLRL sample takes the unused one whose target is nearest its own.
    const free = new Set(c.criticIds.map((_, q) => q));
    const values: number[] = [];
    const expected: number[] = [];
    const targets: number[] = [];
    const expectedTargets: number[] = [];
    for (const s of step.samples_in_step_order) {
      const input = s.value_input_ids.join(',');
      let q: number | undefined;
      for (const r of free) {
        if (c.criticIds[r].join(',') !== input) continue;
        if (q === undefined || Math.abs(c.targets[r] - s.value_target) < Math.abs(c.targets[q] - s.value_target)) q = r;
      }
      if (q !== undefined) free.delete(q);
      if (q === undefined) {
        cmp.problem('critic values in the step', `${where} sample ${s.sample}: comlrl's critic step did not read CoMLRL's critic input`);
        continue;
      }
      values.push(c.values[q]);
      expected.push(s.value);
      targets.push(c.targets[q]);
      expectedTargets.push(s.value_target);
    }
    cmp.values('critic values in the step', where, expected, values, TOLERANCES.estimate);
    cmp.values('TD targets', `${where} (step)`, expectedTargets, targets, TOLERANCES.estimate);
    cmp.values('value losses', where, [step.value_loss], [c.valueLoss], TOLERANCES.loss);
  });
}

/** Every AdamW step (order, losses, gradient norms and samples, parameter changes) and the item's parameter change. */
export function compareSteps(vector: TrainerVector, rec: Recording, cmp: Comparison): void {
  const order = (labels: string[]) => labels.join(' → ');
  cmp.same('optimizer steps (order)', 'models stepped', vector.steps.map((s) => s.model), rec.steps.map((s) => s.model));
  // The loss each step back-propagated, from the trace, per model in order.
  const coef = vector.ac?.ac_steps[0]?.value_loss_coef ?? 1;
  const traced = new Map<string, number[]>();
  for (const e of rec.trace) {
    if (e.kind === 'policy_step') traced.set(`agent${e.agent}`, [...(traced.get(`agent${e.agent}`) ?? []), e.loss]);
    if (e.kind === 'critic_step') {
      const label = vector.trainer === 'MAACTrainer' ? 'critic' : `critic${e.slot}`;
      traced.set(label, [...(traced.get(label) ?? []), coef * e.valueLoss]);
    }
  }
  const seen = new Map<string, number>();
  const n = Math.min(vector.steps.length, rec.steps.length);
  if (vector.steps.length !== rec.steps.length) cmp.problem('optimizer steps (order)', `comlrl: ${order(rec.steps.map((s) => s.model))}; CoMLRL: ${order(vector.steps.map((s) => s.model))}`);
  for (let i = 0; i < n; i++) {
    const want = vector.steps[i];
    const got = rec.steps[i];
    if (want.model !== got.model) continue;
    const k = seen.get(got.model) ?? 0;
    seen.set(got.model, k + 1);
    const where = `step ${i} (${want.phase})`;
    const loss = traced.get(got.model)?.[k];
    if (loss !== undefined) cmp.values('step losses (backward)', where, [sum(want.backward_losses)], [loss], TOLERANCES.loss);
    cmp.values('grad norms', where, [want.grad_norm], [got.gradNorm], TOLERANCES.gradNorm);
    for (const [name, p] of Object.entries(want.params)) {
      const g = got.gradL2.get(name);
      if (p.grad_none) {
        if (g !== undefined) cmp.problem('per-tensor grad L2', `${where} ${name}: CoMLRL had no gradient (None), comlrl one of L2 ${g}`);
      } else if (g === undefined) cmp.problem('per-tensor grad L2', `${where} ${name}: comlrl has no gradient`);
      else cmp.values('per-tensor grad L2', `${where} ${name}`, [p.grad_l2 ?? 0], [g], TOLERANCES.gradL2);
      const d = got.deltaL2.get(name);
      if (d === undefined) cmp.problem('per-tensor step delta L2', `${where} ${name}: not a tensor of comlrl's ${got.model}`);
      else cmp.values('per-tensor step delta L2', `${where} ${name}`, [p.delta_l2], [d], TOLERANCES.deltaL2);
    }
    for (const [name, vals] of Object.entries(want.grad_first8)) {
      // A tensor without a gradient (None) is recorded as zeros, or not at all.
      if (vals === null || want.params[name.replace(/\[\d+\]$/, '')]?.grad_none) continue;
      const g = got.gradFirst8.get(name);
      if (!g) cmp.problem('grad first-8 values', `${where} ${name}: comlrl has no gradient there`);
      else cmp.values('grad first-8 values', `${where} ${name}`, vals, g, TOLERANCES.gradFirst8);
    }
  }
  for (const [label, tensors] of Object.entries(vector.params)) {
    const deltas = rec.itemDelta.get(label);
    if (!deltas) {
      cmp.problem('item delta L2', `comlrl has no model '${label}'`);
      continue;
    }
    for (const [name, p] of Object.entries(tensors)) {
      const d = deltas.get(name);
      if (!d) {
        cmp.problem('item delta L2', `${label} ${name}: not a tensor of comlrl's model`);
        continue;
      }
      cmp.values('item delta L2', `${label} ${name}`, [p.delta_l2], [l2(d)], TOLERANCES.deltaL2);
      let maxAbs = 0;
      for (let i = 0; i < d.length; i++) maxAbs = Math.max(maxAbs, Math.abs(d[i]));
      cmp.values('item delta max abs', `${label} ${name}`, [p.delta_max_abs], [maxAbs], TOLERANCES.deltaFirst8);
    }
  }
  for (const [label, samples] of Object.entries(vector.tensor_samples.delta)) {
    const deltas = rec.itemDelta.get(label);
    if (!deltas) continue;
    for (const [name, vals] of Object.entries(samples)) {
      const m = /^(.*)\[(\d+)\]$/.exec(name);
      const base = m ? m[1] : name;
      const d = deltas.get(base);
      if (!d) {
        cmp.problem('item delta first-8 values', `${label} ${name}: not a tensor of comlrl's model`);
        continue;
      }
      const width = vector.params[label]?.[base]?.shape[1] ?? 1;
      const start = m ? Number(m[2]) * width : 0;
      cmp.values('item delta first-8 values', `${label} ${name}`, vals, [...d.subarray(start, start + vals.length)], TOLERANCES.deltaFirst8);
    }
  }
}
