/**
 * A test hook: `COMLRL_TEST_PAUSE_AT=point[@step][,...]` makes the CLI print
 * `[comlrl-test] paused at POINT step N` on stderr and wait `COMLRL_TEST_PAUSE_MS` (default 5000)
 * milliseconds when it reaches a named point, so a test can kill or signal the real process at
 * exactly that moment (half-way through writing a checkpoint or final/). Unset, it does nothing.
 *
 * Points: `checkpoint-write` (a checkpoint's weights are written, its manifest is not),
 * `final-write` (the same for final/).
 */
export type PausePoint = 'checkpoint-write' | 'final-write';

/** Waits at `point` when the environment asks for it (see the module comment). */
export async function testPause(point: PausePoint, step: number): Promise<void> {
  const spec = process.env.COMLRL_TEST_PAUSE_AT;
  if (!spec) return;
  const hit = spec.split(',').some((p) => {
    const [name, at] = p.trim().split('@');
    return name === point && (at === undefined || Number(at) === step);
  });
  if (!hit) return;
  process.stderr.write(`[comlrl-test] paused at ${point} step ${step}\n`);
  const ms = Number(process.env.COMLRL_TEST_PAUSE_MS ?? 5000);
  await new Promise((resolve) => setTimeout(resolve, Number.isFinite(ms) ? ms : 5000));
}
