import * as tf from '@tensorflow/tfjs';
import { describe, expect, it } from 'vitest';
import { initBackend } from '../src/backend/init.js';
import { AdamW } from '../src/optim/adamw.js';
import { accumulateGradients, applyGradients } from '../trainers/core/loss.js';
import { currentPhaseParts, PhaseTimer } from '../trainers/core/metrics.js';
import { backendUnderTest } from './backend-under-test.js';

/** Busy-waits `ms` milliseconds (a part's time must be measurable). */
function spin(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // waiting
  }
}

describe('PhaseTimer parts', () => {
  it('adds parts reported from the synchronous part of a phase to <phase>_<part>, and nowhere else', async () => {
    const timer = new PhaseTimer();
    await timer.time('training', () => {
      currentPhaseParts()?.add('forward', 0.25);
      return 1;
    });
    // Nested phases report to the innermost; the outer one's recorder comes back after it.
    await timer.time('outer', () => {
      const inner = timer.time('inner', () => currentPhaseParts()?.add('x', 1));
      currentPhaseParts()?.add('y', 2);
      return inner;
    });
    // After an await the caller's recorder is gone (nothing is misattributed).
    await timer.time('late', async () => {
      await Promise.resolve();
      expect(currentPhaseParts()).toBeNull();
    });
    expect(currentPhaseParts()).toBeNull();
    const m = timer.drain('time/');
    expect(m['time/training_forward_s']).toBe(0.25);
    expect(m['time/inner_x_s']).toBe(1);
    expect(m['time/outer_y_s']).toBe(2);
    expect(Object.keys(m).sort()).toEqual(['time/inner_s', 'time/inner_x_s', 'time/late_s', 'time/outer_s', 'time/outer_y_s', 'time/training_forward_s', 'time/training_s']);
  });

  it('splits a gradient step into forward, backward and optimizer inside its phase', async () => {
    await initBackend(backendUnderTest('cpu'));
    const w = tf.variable(tf.tensor1d([1, 2]), true, 'w');
    const opt = new AdamW([w], { lr: 0.1 });
    const timer = new PhaseTimer();
    await timer.time('training', () => {
      const g = accumulateGradients(
        [w],
        [[1], [2]],
        (chunk) => {
          spin(20);
          return tf.mul(tf.sum(tf.square(w)), chunk[0]) as tf.Scalar;
        },
        () => 'non-finite',
      );
      // Σ over chunks of c · Σ w² = 3 · (1 + 4); its gradient 3 · 2w = [6, 12].
      expect(g.loss).toBeCloseTo(15, 5);
      expect(Array.from(g.grads.w.dataSync())).toEqual([6, 12]);
      applyGradients(opt, g.grads, null);
    });
    const m = timer.drain('time/');
    // Two forward passes of ≥ 20 ms each.
    expect(m['time/training_forward_s']).toBeGreaterThanOrEqual(0.04);
    expect(m['time/training_backward_s']).toBeGreaterThan(0);
    expect(m['time/training_optimizer_s']).toBeGreaterThan(0);
    const parts = m['time/training_forward_s'] + m['time/training_backward_s'] + m['time/training_optimizer_s'];
    expect(parts).toBeLessThanOrEqual(m['time/training_s']);
    // Outside a timed phase the helpers record nothing.
    const g = accumulateGradients([w], [[1]], () => tf.sum(w) as tf.Scalar, () => 'non-finite');
    applyGradients(opt, g.grads, null);
    expect(timer.drain('time/')).toEqual({});
    opt.dispose();
    w.dispose();
  });
});
