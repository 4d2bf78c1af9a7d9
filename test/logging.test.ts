import { appendFileSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, describe, expect, it } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/index.js';
import {
  MetricsLogger,
  ProgressBar,
  collectPoints,
  formatBytes,
  formatDuration,
  formatNumber,
  formatSummary,
  peakMemory,
  readMetrics,
  splitMetricKey,
  writePlots,
  buildPlotSpec,
  movingAverage,
  panelsOf,
  secondaryTicks,
  PLOTS_PAGE,
  type MetricsRow,
  REWARD_METRIC_PATTERN,
} from '../src/logging/index.js';

const dirs: string[] = [];
const tempDir = (): string => {
  const d = mkdtempSync(join(tmpdir(), 'comlrl-logging-'));
  dirs.push(d);
  return d;
};
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('MetricsLogger (JSONL)', () => {
  it('writes one line per step that parses back, step first, non-finite as null', () => {
    const path = join(tempDir(), 'run', 'metrics.jsonl');
    const log = MetricsLogger.open(path);
    log.log(1, { 'turn_1/reward_mean': 0.5, 'turn_1/expected_return': 0.75, note: 'x', skipped: undefined });
    log.log(2, { 'turn_1/reward_mean': Number.NaN, ok: true });
    const lines = readFileSync(path, 'utf8').trimEnd().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toBe('{"step":1,"turn_1/reward_mean":0.5,"turn_1/expected_return":0.75,"note":"x"}');
    expect(JSON.parse(lines[1])).toEqual({ step: 2, 'turn_1/reward_mean': null, ok: true });
    expect(readMetrics(path)).toEqual(log.rows());
    expect(() => log.log(3, { step: 1 })).toThrow(/reserved/);
    expect(() => log.log(Number.NaN, {})).toThrow(/step/);
  });

  it('reopening appends; truncateAfterStep drops later lines (resume); a torn last line is dropped', () => {
    const path = join(tempDir(), 'metrics.jsonl');
    const a = MetricsLogger.open(path);
    for (let s = 1; s <= 5; s++) a.log(s, { loss: s / 10 });
    appendFileSync(path, '{"step":6,"loss":0.'); // a crash mid-write
    expect(readMetrics(path).map((r) => r.step)).toEqual([1, 2, 3, 4, 5]);
    const b = MetricsLogger.open(path, { truncateAfterStep: 3 });
    expect(b.rows().map((r) => r.step)).toEqual([1, 2, 3]);
    b.log(4, { loss: 0.44 });
    expect(readMetrics(path).map((r) => [r.step, r.loss])).toEqual([
      [1, 0.1],
      [2, 0.2],
      [3, 0.3],
      [4, 0.44],
    ]);
    const c = MetricsLogger.open(path, { overwrite: true });
    expect(c.rows()).toEqual([]);
    expect(readFileSync(path, 'utf8')).toBe('');
  });

  it('a malformed line in the middle is an error naming file and line', () => {
    const path = join(tempDir(), 'bad.jsonl');
    appendFileSync(path, '{"step":1}\nnot json\n{"step":3}\n');
    expect(() => readMetrics(path)).toThrow(/bad\.jsonl:2: not valid JSON/);
    const path2 = join(tempDir(), 'bad2.jsonl');
    appendFileSync(path2, '{"step":1}\n{"loss":1}\n');
    expect(() => readMetrics(path2)).toThrow(/bad2\.jsonl:2: step/);
  });
});

describe('console summary and formatting', () => {
  it('formats a row; missing keys are skipped', () => {
    const row: MetricsRow = { step: 12, 'turn_1/reward_mean': 0.51234, loss: -0.031234, big: 123456.7, name: 'a', bad: null };
    expect(formatSummary(row)).toBe('step 12 | turn_1/reward_mean 0.5123 | loss -0.03123 | big 1.23e+5 | name a | bad nan');
    expect(formatSummary(row, { keys: ['loss', 'absent', 'turn_1/reward_mean'], prefix: '[magrpo]' })).toBe(
      '[magrpo] step 12 | loss -0.03123 | turn_1/reward_mean 0.5123',
    );
    expect(formatSummary(row, { maxKeys: 1 })).toBe('step 12 | turn_1/reward_mean 0.5123');
  });

  it('numbers, bytes, durations', () => {
    expect(formatNumber(0)).toBe('0');
    expect(formatNumber(42)).toBe('42');
    expect(formatNumber(0.00012345)).toBe('1.23e-4');
    expect(formatNumber(3.14159)).toBe('3.142');
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(3 * 1024 * 1024 * 1024)).toBe('3 GiB');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatDuration(65)).toBe('1:05');
    expect(formatDuration(3725)).toBe('1:02:05');
  });
});

class FakeStream {
  chunks: string[] = [];
  constructor(readonly isTTY: boolean, readonly columns?: number) {}
  write(s: string): boolean {
    this.chunks.push(s);
    return true;
  }
}

describe('ProgressBar', () => {
  it('plain output (not a TTY): a first line, one per 10% and one at the end, no control characters', () => {
    const stream = new FakeStream(false);
    let t = 0;
    const bar = new ProgressBar({ total: 20, label: 'train', stream, now: () => t });
    for (let i = 1; i <= 20; i++) {
      t += 500;
      bar.update(i, { reward: i / 20 });
    }
    bar.update(20); // ignored after finish
    const out = stream.chunks.join('');
    expect(out).not.toMatch(/[\r\x1b]/);
    const lines = out.trimEnd().split('\n');
    expect(lines).toHaveLength(11); // 1 (the first update), then 2, 4, ..., 20: every 10%
    expect(lines[1]).toBe('train 2/20 10% 0:01<0:09 2.00 it/s reward=0.1');
    expect(lines[10]).toBe('train 20/20 100% 0:10<0:00 2.00 it/s reward=1');
  });

  it('TTY output redraws one line in place, throttled, fitted to the terminal width', () => {
    const stream = new FakeStream(true, 60);
    let t = 0;
    const bar = new ProgressBar({ total: 4, stream, width: 8, now: () => t, redrawMs: 100 });
    t = 1000;
    bar.update(1, { r: 0.25 });
    t = 1050;
    bar.update(2); // within 100 ms: not drawn
    t = 4000;
    bar.update(4);
    expect(stream.chunks).toHaveLength(3); // two draws and the final newline
    expect(stream.chunks[0]).toBe('\r[##......] 1/4 25% 0:01<0:03 1.00 it/s r=0.25\x1b[K');
    expect(stream.chunks[1].startsWith('\r[########] 4/4 100% 0:04<0:00')).toBe(true);
    expect(stream.chunks[2]).toBe('\n');
    for (const c of stream.chunks) expect(c.replace('\x1b[K', '').replace('\r', '').length).toBeLessThan(60);
  });

  it('a starting step (resumed run): the bar starts there, rate and ETA count only this session', () => {
    const stream = new FakeStream(false);
    let t = 0;
    const bar = new ProgressBar({ total: 800, initial: 120, label: 'train', stream, now: () => t });
    expect(bar.render()).toMatch(/^train 120\/800 15% 0:00<.* 0\.00 it\/s$/);
    t = 10_000;
    bar.update(140);
    // 20 steps in 10 s: 2 it/s, 660 left: 5:30.
    expect(stream.chunks.join('')).toContain('train 140/800 17% 0:10<5:30 2.00 it/s');
    expect(() => new ProgressBar({ total: 4, initial: -1, stream })).toThrow(/initial/);
  });

  it('rejects a bad total', () => {
    expect(() => new ProgressBar({ total: 0, stream: new FakeStream(false) })).toThrow(/total/);
  });
});

describe('plots', () => {
  const rows: MetricsRow[] = [];
  for (let s = 0; s < 6; s++) {
    rows.push({
      step: s,
      'turn_1/reward_mean': s / 5,
      'turn_2/reward_mean': s / 10,
      'turn_1/expected_return': s / 4,
      'agent_0/policy_loss': 1 / (s + 1),
      ...(s % 2 === 0 ? { 'critic/value_loss': 2 / (s + 1) } : {}),
      ...(s === 3 ? { 'eval/turn_1/mean_reward': 0.4 } : {}),
      'turn_1/value_pred_mean': s === 2 ? null : 0.1,
    });
  }

  it('splits keys into panel and series', () => {
    expect(splitMetricKey('turn_2/reward_mean')).toEqual({ panel: 'reward_mean', series: 'turn_2', name: 'reward_mean' });
    expect(splitMetricKey('eval/turn_1/mean_reward')).toEqual({ panel: 'eval/mean_reward', series: 'turn_1', name: 'mean_reward' });
    expect(splitMetricKey('loss')).toEqual({ panel: 'loss', series: 'loss', name: 'loss' });
  });

  it('collects only matching numeric values; absent and null values give no point', () => {
    const reward = collectPoints(rows, /reward|return/i);
    expect(reward.filter((p) => p.panel === 'reward_mean')).toHaveLength(12);
    expect(reward.filter((p) => p.panel === 'eval/mean_reward')).toEqual([{ x: 3, value: 0.4, series: 'turn_1', panel: 'eval/mean_reward' }]);
    const loss = collectPoints(rows, /loss/i);
    expect(loss.filter((p) => p.series === 'critic').map((p) => p.x)).toEqual([0, 2, 4]);
    expect(collectPoints(rows, /value_pred/).map((p) => p.x)).toEqual([0, 1, 3, 4, 5]);
  });

  it("rows that carry `<prefix>/step` draw their `<prefix>/*` keys against it, in panels of their own (MARLHF's fit rows share one env step)", () => {
    const fit = [1, 2, 3].map((k) => ({ step: 40, 'reward_model/step': k, 'reward_model/loss': 1 / k, 'reward_model/accuracy': k / 3 }));
    const rowsWithFit = [...fit, { step: 44, 'agent_0/loss': 0.2 }];
    const loss = collectPoints(rowsWithFit, /loss/i);
    expect(loss.filter((p) => p.panel === 'reward_model/loss').map((p) => [p.x, p.value])).toEqual([
      [1, 1],
      [2, 1 / 2],
      [3, 1 / 3],
    ]);
    expect(loss.find((p) => p.panel === 'reward_model/loss')?.axis).toBe('reward_model/step');
    // Other keys keep the row's x and their usual panel.
    expect(loss.filter((p) => p.panel === 'loss')).toEqual([{ x: 44, value: 0.2, series: 'agent_0', panel: 'loss' }]);
  });

  it('the default reward figure takes reward/return/paper metrics, not timing or spread keys', () => {
    const keys = [{ step: 1, 'turn_1/reward_mean': 0.5, 'eval/turn_1/mean_return': 0.7, 'time/reward_s': 0.01, zero_reward_spread_frac: 0.2, 'eval/iou': 0.3 }];
    const panels = collectPoints(keys, REWARD_METRIC_PATTERN).map((p) => p.panel).sort();
    expect(panels).toEqual(['eval/iou', 'eval/mean_return', 'reward_mean']);
  });

  it('writes PNG + SVG figures for rewards and losses; figures without data are skipped', async () => {
    const dir = tempDir();
    const files = await writePlots(dir, rows, { title: 'test run' });
    expect(files.map((f) => f.name)).toEqual(['rewards', 'losses']);
    for (const f of files) {
      const png = readFileSync(f.png);
      expect([...png.subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
      // IHDR width/height are nonzero.
      expect(png.readUInt32BE(16)).toBeGreaterThan(100);
      expect(png.readUInt32BE(20)).toBeGreaterThan(100);
      const svg = readFileSync(f.svg, 'utf8');
      expect(svg.startsWith('<svg')).toBe(true);
    }
    const rewardsSvg = readFileSync(join(dir, 'rewards.svg'), 'utf8');
    for (const label of ['reward_mean', 'expected_return', 'eval/mean_reward', 'turn_2']) expect(rewardsSvg).toContain(label);
    expect(readdirSync(dir).filter((n) => n.includes('.tmp-'))).toEqual([]);

    const only = tempDir();
    const lossOnly = await writePlots(only, [{ step: 1, loss: 0.3 }, { step: 2 }, { step: 3, loss: 0.1 }]);
    expect(lossOnly.map((f) => f.name)).toEqual(['losses']);
    expect(existsSync(join(only, 'rewards.png'))).toBe(false);
    expect(await writePlots(tempDir(), [{ step: 1 }])).toEqual([]);
    expect(statSync(lossOnly[0].png).size).toBeGreaterThan(1000);
  });
});

describe('plots a person reads: items on x, smoothing, random-play line, distinct panels, KL', () => {
  /** A single-turn run: 8 env steps per item, one train row per item, evals every 4 items, reference KL. */
  const runRows = (items: number): MetricsRow[] => {
    const rows: MetricsRow[] = [{ step: 0, 'run/trainer': 'magrpo' }];
    for (let i = 1; i <= items; i++) {
      if ((i - 1) % 4 === 0) rows.push({ step: (i - 1) * 8, 'eval/turn_1/mean_reward': i / items, 'eval/turn_1/mean_return': i / items, items: i - 1 });
      const r = (i % 5) / 4;
      rows.push({ step: i * 8, 'turn_1/reward_mean': r, 'turn_1/expected_return': r, 'agent_0/loss': 1 / i, 'agent_0/turn_1/kl/mean': i / 100, 'agent_1/turn_1/kl/mean': i / 50, items: i });
    }
    return rows;
  };

  it('names the KL metric after its turn and agent segments', () => {
    expect(splitMetricKey('agent_0/turn_1/kl/mean')).toEqual({ panel: 'kl/mean', series: 'agent_0/turn_1', name: 'kl/mean' });
    expect(splitMetricKey('agent_1/turn_2/kl/penalty_mean')).toEqual({ panel: 'kl/penalty_mean', series: 'agent_1/turn_2', name: 'kl/penalty_mean' });
    expect(splitMetricKey('critic/value_loss')).toEqual({ panel: 'value_loss', series: 'critic', name: 'value_loss' });
  });

  it('a trailing moving average (hand values)', () => {
    expect(movingAverage([1, 2, 3, 4, 5], 2)).toEqual([1, 1.5, 2.5, 3.5, 4.5]);
    expect(movingAverage([3, 0, 6, 3], 3)).toEqual([3, 1.5, 3, 3]);
    expect(movingAverage([2, 4], 1)).toEqual([2, 4]);
    expect(() => movingAverage([1], 0)).toThrow(/window/);
  });

  it('panels holding the same numbers merge into one; differing ones stay apart', () => {
    const same = collectPoints(runRows(8), REWARD_METRIC_PATTERN, 'items');
    expect(panelsOf(same).map((p) => p.names)).toEqual([['expected_return', 'reward_mean'], ['eval/mean_return', 'eval/mean_reward']]);
    const differ = collectPoints([{ step: 1, items: 1, 'turn_1/reward_mean': 0.5, 'turn_1/expected_return': 0.9 }], REWARD_METRIC_PATTERN, 'items');
    expect(panelsOf(differ).map((p) => p.names)).toEqual([['expected_return'], ['reward_mean']]);
  });

  it('env steps on the top axis: round env-step values at the items where the run reached them', () => {
    // 8 env steps per item up to 320 items (2,560 env steps): ticks every 1,000 env steps, at 1000 / 8 = 125 items apart.
    expect(secondaryTicks(runRows(320), 'items', 'step', 320)).toEqual({ values: [0, 125, 250], labels: ['0', '1,000', '2,000'] });
    // As many env steps as items: no second axis.
    expect(secondaryTicks([{ step: 1, items: 1 }, { step: 2, items: 2 }], 'items', 'step', 2)).toBeNull();
  });

  it('the x-axis is training items (0 to the last item), not env steps; the reward panels carry the random-play line, the losses none', () => {
    const rows = runRows(320);
    const spec = buildPlotSpec(collectPoints(rows, REWARD_METRIC_PATTERN, 'items'), { figureTitle: 'rewards', xKey: 'items', randomPlay: { perTurn: [16 / 225], label: 'uniform random play' } });
    const text = JSON.stringify(spec);
    expect(text).toContain('"title":"training items"');
    expect(text).toContain('"domain":[0,320]');
    expect(text).toContain('uniform random play: 0.0711');
    const losses = JSON.stringify(buildPlotSpec(collectPoints(rows, /loss/i, 'items'), { figureTitle: 'losses', xKey: 'items', randomPlay: { perTurn: [16 / 225], label: 'uniform random play' } }));
    expect(losses).not.toContain('uniform random play');
    // Without items the axis is the env step, as a library user logs it.
    expect(JSON.stringify(buildPlotSpec([{ x: 1, value: 1, series: 'loss', panel: 'loss' }], { figureTitle: 'l' }))).toContain('"title":"env steps"');
  });

  it('writePlots: items by default, smoothing named, one panel per distinct metric, a KL figure and plots.html with every figure', async () => {
    const dir = tempDir();
    const files = await writePlots(dir, runRows(320), { title: 'toy <run>', randomPlay: { perTurn: [16 / 225], label: 'uniform random play' } });
    expect(files.map((f) => f.name)).toEqual(['rewards', 'losses', 'kl']);
    const rewards = readFileSync(join(dir, 'rewards.svg'), 'utf8');
    for (const label of ['training items', 'env steps', '2,000', 'expected_return = reward_mean', 'eval/mean_return = eval/mean_reward', 'line: mean of the last 16 points', 'uniform random play: 0.0711']) expect(rewards, label).toContain(label);
    // Merged: no panel of its own titled reward_mean (nor eval/mean_reward).
    expect(rewards).not.toMatch(/>reward_mean<\/text>/);
    expect(rewards).not.toMatch(/>eval\/mean_reward<\/text>/);
    expect(rewards).toMatch(/>expected_return = reward_mean<\/text>/);
    const kl = readFileSync(join(dir, 'kl.svg'), 'utf8');
    for (const label of ['kl/mean', 'agent_0/turn_1', 'agent_1/turn_1']) expect(kl, label).toContain(label);
    const page = readFileSync(join(dir, PLOTS_PAGE), 'utf8');
    expect(page.match(/<svg /g)).toHaveLength(3);
    expect(page).toContain('<title>toy &lt;run&gt;</title>');
    expect(page).toContain('x-axis: training items (top axis: env steps)');
    // No reference KL logged: no KL figure.
    const plain = tempDir();
    expect((await writePlots(plain, [{ step: 1, items: 1, loss: 0.3 }])).map((f) => f.name)).toEqual(['losses']);
    expect(existsSync(join(plain, 'kl.svg'))).toBe(false);
  });
});

describe('peakMemory', () => {
  it('reports rss and tensor bytes, with peaks that never fall', async () => {
    setBackendLogger(null);
    await initBackend('cpu');
    const before = peakMemory();
    expect(before.rssBytes).toBeGreaterThan(0);
    expect(before.peakRssBytes).toBeGreaterThanOrEqual(before.rssBytes);
    const t = tf.zeros([1000, 250]); // 1e6 bytes
    const during = peakMemory();
    expect(during.tensorBytes - before.tensorBytes).toBe(1_000_000);
    expect(during.numTensors).toBe(before.numTensors + 1);
    t.dispose();
    const after = peakMemory();
    expect(after.tensorBytes).toBe(before.tensorBytes);
    expect(after.peakTensorBytes).toBeGreaterThanOrEqual(during.tensorBytes);
    expect(after.peakRssBytes).toBeGreaterThanOrEqual(during.peakRssBytes);
  });
});
