/**
 * The `comlrl` CLI, in process: help and usage errors, config errors naming the key, tiny-model,
 * and a real `train` from a YAML file on tiny checkpoints (run directory, metrics, plots,
 * checkpoints loadable with loadCausalLM), then `eval` on what it trained.
 */
import { existsSync } from 'node:fs';
import { cp, mkdir, readdir, readFile, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import { verifyCheckpoint } from '../src/checkpoint/atomic.js';
import { readMetrics } from '../src/logging/metrics.js';
import { loadCausalLM } from '../src/model/load.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { cli, toyConfigYaml, useCliWorkspace } from './cli-helpers.js';

const ws = useCliWorkspace('cli');

describe('help and usage', () => {
  test('top-level and per-command help', async () => {
    const top = await cli(['--help']);
    expect(top.code).toBe(0);
    for (const c of ['train', 'eval', 'demo', 'tiny-model']) expect(top.out).toContain(c);
    for (const c of ['train', 'eval', 'demo', 'tiny-model']) {
      const r = await cli([c, '--help']);
      expect(r.code, c).toBe(0);
      expect(r.out, c).toMatch(new RegExp(`^usage: comlrl ${c}`));
    }
    expect((await cli([])).code).toBe(2);
  });

  test('usage errors name the problem and exit 2', async () => {
    const none = await cli(['train']);
    expect(none.code).toBe(2);
    expect(none.err).toMatch(/--config FILE is required/);
    expect(none.err).toMatch(/usage: comlrl train/);
    const unknown = await cli(['train', '--confg', 'x.yaml']);
    expect(unknown.code).toBe(2);
    expect(unknown.err).toMatch(/unknown option --confg/);
    const missingValue = await cli(['tiny-model', '--arch']);
    expect(missingValue.err).toMatch(/--arch needs a value/);
    const badArch = await cli(['tiny-model', '--arch', 'gpt2', '--out', join(ws.root, 'x')]);
    expect(badArch.code).toBe(2);
    expect(badArch.err).toMatch(/--arch must be qwen3, qwen2 or llama/);
    const cmd = await cli(['trian']);
    expect(cmd.code).toBe(2);
    expect(cmd.err).toMatch(/unknown command 'trian'/);
    const demo = await cli(['demo', '--trainer', 'ppo']);
    expect(demo.err).toMatch(/--trainer must be one of magrpo, collm-dc, collm-cc/);
  });
});

describe('config errors name the key', () => {
  test('unknown keys, bad values and bad overrides', async () => {
    const file = join(ws.root, 'bad.yaml');
    const good = toyConfigYaml({ agents: ws.agents, out: join(ws.root, 'never') });
    await writeFile(file, good.replace('model:\n', 'model:\n  temprature: 0.5\n'));
    const unknown = await cli(['train', '--config', file]);
    expect(unknown.code).toBe(1);
    expect(unknown.err).toMatch(/model\.temprature: unknown key \(allowed here: agent_model, agents/);

    await writeFile(file, good);
    const bad = await cli(['train', '--config', file, '--set', 'magrpo.num_generations=1', '--set', 'dataset.task=chess']);
    expect(bad.code).toBe(1);
    expect(bad.err).toMatch(/dataset\.task: dataset\.task must be one of/);
    const badTrainer = await cli(['train', '--config', file, '--set', 'magrpo.num_generations=1']);
    expect(badTrainer.err).toMatch(/magrpo\.num_generations: num_generations must be an integer >= 2 \(got 1\)/);
    const typo = await cli(['train', '--config', file, '--set', 'magrpo.num_generation=4']);
    expect(typo.err).toMatch(/magrpo\.num_generation: unknown key/);
    const two = await cli(['train', '--config', file, '--set', 'collm_cc.num_turns=1']);
    expect(two.err).toMatch(/exactly one trainer section is allowed/);
    const notSection = await cli(['train', '--config', file, '--set', 'seed.x=1']);
    expect(notSection.err).toMatch(/seed: is 3, not a section/);
    expect(existsSync(join(ws.root, 'never'))).toBe(false);
  });
});

test('tiny-model writes a checkpoint loadCausalLM reads', async () => {
  const out = join(ws.root, 'tiny-llama');
  const r = await cli(['tiny-model', '--arch', 'llama', '--out', out, '--seed', '4', '--hidden', '32', '--layers', '1']);
  expect(r.code).toBe(0);
  const m = await loadCausalLM(out);
  expect(m.architecture).toBe('llama');
  expect(m.hiddenSize).toBe(32);
  m.dispose();
  const again = await cli(['tiny-model', '--arch', 'llama', '--out', out]);
  expect(again.code).toBe(2);
  expect(again.err).toMatch(/is not empty/);
});

describe('train from a YAML file, then eval', () => {
  let runDir: string;
  let trainRun: Awaited<ReturnType<typeof cli>>;

  beforeAll(async () => {
    runDir = join(ws.root, 'run');
    const file = join(ws.root, 'train.yaml');
    await writeFile(file, toyConfigYaml({ agents: ws.agents, out: runDir }));
    trainRun = await cli(['train', '--config', file]);
  });

  test('exits 0 and prints a summary with the run directory', () => {
    expect(trainRun.code, trainRun.err).toBe(0);
    expect(trainRun.err).toMatch(/training magrpo on toy-coord: 6 steps \(2 epochs × 3 items\) · backend \w+ · seed 3 · config [0-9a-f]{16}/);
    expect(trainRun.err).toMatch(/done: 6\/6 steps/);
    expect(trainRun.err).toMatch(/eval episode reward: before .* → after/);
    expect(trainRun.err).toContain('run directory');
    // The progress bar printed its plain lines (not a terminal).
    expect(trainRun.err).toMatch(/6\/6 100%/);
  });

  test('metrics.jsonl: run info, CoMLRL train and eval names, perf extras', () => {
    const rows = readMetrics(join(runDir, 'metrics.jsonl'));
    expect(rows[0]).toMatchObject({ step: 0, 'run/seed': 3, 'run/trainer': 'magrpo', 'run/task': 'toy-coord' });
    expect(typeof rows[0]['run/backend']).toBe('string');
    expect(rows[0]['run/config_hash']).toMatch(/^[0-9a-f]{16}$/);
    const train = rows.filter((r) => 'turn_1/reward_mean' in r);
    expect(train).toHaveLength(6);
    for (const key of ['turn_1/expected_return', 'agent_0/tokens_generated', 'perf/tokens_per_s', 'perf/peak_rss_mb', 'perf/tensor_mb']) expect(train[5], key).toHaveProperty(key);
    expect(train.some((r) => typeof r['agent_0/loss'] === 'number')).toBe(true);
    expect(rows.some((r) => 'eval/turn_1/mean_reward' in r)).toBe(true);
    // The before-training eval stands in for the trainer's own eval due at item 0: one row, not two.
    expect(rows.filter((r) => r.step === 0 && 'eval/turn_1/mean_reward' in r)).toHaveLength(1);
    expect(rows.some((r) => 'turn_1/epoch_reward_mean' in r)).toBe(true);
    expect(rows.some((r) => r.final_model_saved === 1)).toBe(true);
    // The x-axis is env_step (2 joint actions per item).
    expect(train.map((r) => r.step)).toEqual([2, 4, 6, 8, 10, 12]);
    // `items`: the training items a row covers (the plots' x, the progress bar's unit). A train row
    // logged inside item k counts it; an eval row (before its item trains) and the rows after an
    // item count the items done: so every row here has env_step = 2 · items.
    expect(train.map((r) => r.items)).toEqual([1, 2, 3, 4, 5, 6]);
    const evals = rows.filter((r) => 'eval/turn_1/mean_reward' in r);
    expect(evals.map((r) => r.items)).toEqual(evals.map((r) => r.step / 2));
    expect(evals[0].items).toBe(0);
    expect(evals[evals.length - 1].items).toBe(6);
    for (const r of rows.slice(1)) expect(r.items, JSON.stringify(r)).toBe(r.step / 2);
  });

  test('plots, config, eval.json', async () => {
    for (const f of ['rewards.png', 'rewards.svg', 'losses.png', 'losses.svg', 'plots.html']) {
      const bytes = await readFile(join(runDir, f));
      expect(bytes.length, f).toBeGreaterThan(1000);
      if (f.endsWith('.png')) expect(bytes.subarray(1, 4).toString('latin1')).toBe('PNG');
    }
    // Training items on x (6 here), env steps on top; the toy task's random-play line (16/225).
    const rewards = await readFile(join(runDir, 'rewards.svg'), 'utf8');
    for (const label of ['training items', 'env steps', 'uniform random play: 0.0711']) expect(rewards, label).toContain(label);
    expect(await readFile(join(runDir, 'plots.html'), 'utf8')).toContain('<title>toy-coord · magrpo</title>');
    const cfg = await readFile(join(runDir, 'config.yaml'), 'utf8');
    expect(cfg).toMatch(/num_generations: 2/);
    const evals = JSON.parse(await readFile(join(runDir, 'eval.json'), 'utf8')) as { before: { episodeReward: number }; after: { episodeReward: number } };
    expect(Number.isFinite(evals.before.episodeReward)).toBe(true);
    expect(Number.isFinite(evals.after.episodeReward)).toBe(true);
  });

  test('checkpoints every save_steps verify and load with loadCausalLM; final/ too', async () => {
    const ckpts = (await readdir(join(runDir, 'checkpoints'))).sort();
    expect(ckpts).toEqual(['step-000002', 'step-000004', 'step-000006']);
    for (const c of ckpts) {
      const dir = join(runDir, 'checkpoints', c);
      const manifest = await verifyCheckpoint(dir);
      expect(manifest.step).toBe(Number(c.slice(5)));
      for (const f of ['trainer_state.json', 'optimizer.safetensors', 'run_state.json', 'config.json']) expect(existsSync(join(dir, f)), f).toBe(true);
    }
    for (const dir of [join(runDir, 'checkpoints', 'step-000004', 'agent_1'), join(runDir, 'final', 'agent_0')]) {
      const m = await loadCausalLM(dir);
      const t = await loadTokenizer(dir);
      expect(m.vocabSize).toBeGreaterThanOrEqual(t.vocabSize);
      m.dispose();
    }
  });

  test('a second train into the same directory is refused', async () => {
    const again = await cli(['train', '--config', join(runDir, 'config.yaml')]);
    expect(again.code).toBe(1);
    expect(again.err).toMatch(/already holds a run; continue it with --resume/);
  });

  test('eval: the toy metrics for the trained agents and for the base models', async () => {
    const out = join(ws.root, 'eval.json');
    const trained = await cli(['eval', '--config', join(runDir, 'config.yaml'), '--checkpoint', runDir, '--samples', '2', '--out', out]);
    expect(trained.code, trained.err).toBe(0);
    expect(trained.out).toMatch(/toy\/reward_mean\s+[\d.e-]+/);
    expect(trained.out).toMatch(/toy\/success_rate/);
    const report = JSON.parse(await readFile(out, 'utf8')) as { models: string; metrics: Record<string, number> };
    expect(report.models).toBe(join(runDir, 'final'));
    expect(report.metrics.eval_items).toBe(4);
    expect(report.metrics.samples_per_item).toBe(2);
    const base = await cli(['eval', '--config', join(runDir, 'config.yaml'), '--greedy', '--limit', '2']);
    expect(base.code, base.err).toBe(0);
    expect(base.err).toMatch(/2 eval items × 1 sample\(s\).*base models/);
  });

  test('eval refuses a damaged checkpoint, naming the file', async () => {
    // A copy, so the run directory the other tests read stays intact.
    const copy = join(ws.root, 'damaged-ckpt');
    await cp(join(runDir, 'checkpoints', 'step-000004'), copy, { recursive: true });
    const weights = join(copy, 'agent_0', 'model.safetensors');
    await truncate(weights, 100);
    const r = await cli(['eval', '--config', join(runDir, 'config.yaml'), '--checkpoint', copy, '--greedy', '--limit', '1']);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/agent_0\/model.safetensors has 100 bytes, the manifest records \d+ \(truncated or modified\)/);
  });
});

/** The rows of the demo's before/after table: per side, the two agents' texts and the reward. */
function demoTable(out: string): { cue: string; before: { said: string[]; reward: number }; after: { said: string[]; reward: number } }[] {
  expect(out).toMatch(/demo: what the agents wrote for 2 fixed prompts, greedy/);
  const side = (text: string) => {
    const m = /^("(?:[^"\\]|\\.)*")\s+("(?:[^"\\]|\\.)*")\s+(\S+)$/.exec(text.trim());
    if (!m) throw new Error(`not a table side: ${text}`);
    return { said: [JSON.parse(m[1]) as string, JSON.parse(m[2]) as string], reward: Number(m[3]) };
  };
  return out
    .split('\n')
    .map((line) => /^\s+cue (\w+)\s+│(.*)│(.*)$/.exec(line))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ cue: m[1], before: side(m[2]), after: side(m[3]) }));
}

/** The toy rule by hand: each agent's answer is its first word; 0.25 per answer of the cue, + 0.5 when both gave the same one. */
function handToyScore(cue: string, a: string, b: string): number {
  const answers: Record<string, string[]> = { red: ['apple', 'rose'], blue: ['sky', 'sea'] };
  const first = (t: string) => t.split(/\s+/).find((w) => w !== '')?.toLowerCase();
  const [wa, wb] = [first(a), first(b)];
  const ok = (w: string | undefined) => w !== undefined && answers[cue].includes(w);
  return (ok(wa) ? 0.25 : 0) + (ok(wb) ? 0.25 : 0) + (ok(wa) && wa === wb ? 0.5 : 0);
}

test('demo: a short run end to end with cached tiny checkpoints, reporting the margin', async () => {
  const cache = join(ws.root, 'cache');
  const out = join(ws.root, 'demo-run');
  const r = await cli(['demo', '--steps', '4', '--seed', '1', '--out', out, '--cache', cache]);
  expect(r.code, r.err).toBe(0);
  expect(r.out).toMatch(/demo: evaluated reward [\d.e-]+ → [\d.e-]+ \(margin [+-][\d.e-]+; 1 = the agents always agree/);
  expect(r.out).toContain('demo: run directory');
  // What the agents wrote, before and after, for the first two eval cues; each reward is the toy
  // rule applied to the printed answers (first words): 0.25 per answer of the cue, + 0.5 if equal.
  const table = demoTable(r.out);
  expect(table.map((row) => row.cue)).toEqual(['red', 'blue']);
  for (const row of table) for (const side of [row.before, row.after]) expect(side.reward, JSON.stringify(row)).toBeCloseTo(handToyScore(row.cue, side.said[0], side.said[1]), 12);
  for (const f of ['config.yaml', 'metrics.jsonl', 'plots.html', 'rewards.png', 'losses.png', 'final/agent_1/model.safetensors', 'checkpoints/step-000002/manifest.json']) {
    expect(existsSync(join(out, f)), f).toBe(true);
  }
  // The checkpoints are cached: a second demo reuses them (same files, untouched).
  const marker = join(cache, 'demo', 'agent-a', 'comlrl-demo.json');
  const before = await readFile(marker, 'utf8');
  const again = await cli(['demo', '--trainer', 'collm-cc', '--steps', '2', '--out', join(ws.root, 'demo-cc'), '--cache', cache]);
  expect(again.code, again.err).toBe(0);
  expect(await readFile(marker, 'utf8')).toBe(before);
  // Greedy on the same starting checkpoints: the "before" side is the same words for any trainer.
  expect(demoTable(again.out).map((row) => row.before)).toEqual(table.map((row) => row.before));
  expect(existsSync(join(cache, 'demo', 'critic-a', 'model.safetensors'))).toBe(true);
});

describe('reviewer fixes: output paths, splits, hints', () => {
  test("train refuses to overwrite a config.yaml already in the output directory (the user's own)", async () => {
    const dir = join(ws.root, 'user-dir');
    await mkdir(dir, { recursive: true });
    const file = join(dir, 'config.yaml');
    const text = `# my precious comments\n${toyConfigYaml({ agents: ws.agents, out: join(ws.root, 'elsewhere') })}`;
    await writeFile(file, text);
    const r = await cli(['train', '--config', file, '--set', `output.dir=${dir}`]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/already contains config\.yaml \(.*user-dir[/\\]config\.yaml\), which this run would overwrite.*set output\.dir to a new directory/);
    expect(await readFile(file, 'utf8')).toBe(text);
    expect(await readdir(dir)).toEqual(['config.yaml']);
  });

  test('bad output paths are refused up front, naming the option', async () => {
    const aFile = join(ws.root, 'a-file.txt');
    await writeFile(aFile, 'x');
    const file = join(ws.root, 'paths.yaml');
    await writeFile(file, toyConfigYaml({ agents: ws.agents, out: aFile }));
    const train = await cli(['train', '--config', file]);
    expect(train.code).toBe(1);
    expect(train.err).toMatch(/output\.dir .*a-file\.txt is a file, not a directory/);
    expect(train.err).not.toMatch(/training magrpo|EEXIST/);
    const under = await cli(['train', '--config', file, '--set', `output.dir=${join(aFile, 'run')}`]);
    expect(under.code).toBe(1);
    expect(under.err).toMatch(/output\.dir .*: .*a-file\.txt is a file, not a directory/);

    const tiny = await cli(['tiny-model', '--arch', 'qwen3', '--out', aFile]);
    expect(tiny.code).toBe(2);
    expect(tiny.err).toMatch(/--out .*a-file\.txt is a file, not a directory/);
    expect(tiny.err).not.toMatch(/ENOTDIR/);

    const ev = await cli(['eval', '--config', file, '--greedy', '--limit', '1', '--out', join(aFile, 'eval.json')]);
    expect(ev.code).toBe(2);
    expect(ev.err).toMatch(/--out .*eval\.json: .*a-file\.txt is a file, not a directory/);
    expect(ev.err).not.toMatch(/\d+ eval items ×/);
  });

  test('an empty train split names dataset.train_split; an empty eval split warns once', async () => {
    const file = join(ws.root, 'splits.yaml');
    await writeFile(file, toyConfigYaml({ agents: ws.agents, out: join(ws.root, 'splits-run'), trainItems: 1, section: { num_train_epochs: 1 } }));
    const empty = await cli(['train', '--config', file, '--set', 'dataset.train_split=[:0]']);
    expect(empty.code).toBe(1);
    expect(empty.err).toMatch(/dataset\.train_split '\[:0\]' selects no rows from the built-in train items of task toy-coord/);
    expect(existsSync(join(ws.root, 'splits-run'))).toBe(false);

    const noEval = await cli(['train', '--config', file, '--set', 'dataset.eval_split=[:0]']);
    expect(noEval.code, noEval.err).toBe(0);
    expect(noEval.err.match(/warning: dataset\.eval_split '\[:0\]' selects no rows/g)).toHaveLength(1);
  });

  test('eval --help shows --limit in the usage line', async () => {
    const r = await cli(['eval', '--help']);
    expect(r.out.split('\n')[0]).toMatch(/\[--limit N\]/);
  });

  test("demo's hint for an output directory that holds a run names --out, not --resume", async () => {
    const out = join(ws.root, 'demo-taken');
    await mkdir(out, { recursive: true });
    await writeFile(join(out, 'metrics.jsonl'), '');
    const r = await cli(['demo', '--steps', '1', '--out', out, '--cache', join(ws.root, 'cache-hint')]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/already holds a run; choose another --out DIR/);
    expect(r.err).not.toMatch(/--resume|output\.dir/);
  });
});
