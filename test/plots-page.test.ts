/**
 * plots.html in a real browser: the page writePlots makes loads in headless Chromium with no
 * console error, no exception and no failed load, and shows every figure. Skipped (with the reason)
 * where chromium is not installed, unless COMLRL_REQUIRE_CHROMIUM=1 (CI), where that fails.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { PLOTS_PAGE, writePlots, type MetricsRow } from '../src/logging/index.js';
import { chromiumPath, loadPage } from './chromium-page.js';

const bin = chromiumPath();
const required = process.env.COMLRL_REQUIRE_CHROMIUM === '1';
const root = mkdtempSync(join(tmpdir(), 'comlrl-plots-page-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

test.runIf(required && bin === null)('chromium is installed (COMLRL_REQUIRE_CHROMIUM=1)', () => {
  expect.fail('COMLRL_REQUIRE_CHROMIUM=1 but no chromium on PATH (nor $CHROMIUM): apt-get install -y chromium');
});

const skipReason = bin === null ? ' [skipped: no chromium on PATH or $CHROMIUM; apt-get install -y chromium]' : '';

describe.skipIf(bin === null)(`plots.html in headless Chromium${skipReason}`, () => {
  /** A run's rows: 8 env steps per item, a train row per item, an eval every 4 items, reference KL. */
  function runRows(): MetricsRow[] {
    const rows: MetricsRow[] = [{ step: 0, 'run/trainer': 'magrpo' }];
    for (let item = 1; item <= 40; item++) {
      if ((item - 1) % 4 === 0) rows.push({ step: (item - 1) * 8, 'eval/turn_1/mean_reward': item / 40, items: item - 1 });
      rows.push({ step: item * 8, 'turn_1/reward_mean': (item % 3) / 3, 'turn_1/expected_return': (item % 3) / 3, 'agent_0/loss': 1 / item, 'agent_0/turn_1/kl/mean': item / 100, items: item });
    }
    return rows;
  }

  test('the page a run writes loads with no console error and shows its three figures', async () => {
    const dir = join(root, 'run');
    await writePlots(dir, runRows(), { title: 'toy-coord · magrpo', randomPlay: { perTurn: [16 / 225], label: 'uniform random play' } });
    const report = await loadPage(bin as string, join(dir, PLOTS_PAGE), `[...document.querySelectorAll('section')].map((s) => s.id + ':' + s.querySelectorAll('svg').length)`);
    expect(report.errors).toEqual([]);
    expect(report.value).toEqual(['rewards:1', 'losses:1', 'kl:1']);
  }, 120_000);

  test('the check sees a console error and a failed load (it cannot pass on a page it did not read)', async () => {
    const file = join(root, 'bad.html');
    writeFileSync(file, '<!doctype html><html><head><link rel="icon" href="data:,"></head><body><img src="missing.png"><script>console.error("broken figure")</script></body></html>');
    const report = await loadPage(bin as string, file, 'document.body.children.length');
    expect(report.errors.some((e) => e === 'console.error: broken figure')).toBe(true);
    expect(report.errors.some((e) => e.startsWith('log: ') && e.includes('missing.png'))).toBe(true);
    expect(report.value).toBe(2);
  }, 120_000);
});
