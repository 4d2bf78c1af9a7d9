/**
 * Training callbacks: `train()` reports the events of its loop (train begin and end, item begin and
 * end, evaluation, checkpoint, metrics log) to a list of callbacks, each with one job (a progress
 * bar, checkpoints, early stopping, a custom metric). They steer the loop through one shared
 * {@link TrainerControl}: any callback may ask it to stop or to write a checkpoint, and the ones
 * after it in the list see the request.
 *
 * Order: every event goes to the callbacks in list order, except the end of training, which goes
 * in reverse order (the first to begin is the last to end, as nested blocks unwind), so a callback
 * that sets something up at train begin still has it while the later ones finish.
 */
import type { MetricRecord } from './metrics.js';
import type { DatasetCursor } from './state.js';

/** Where the run is when an event fires. */
export interface TrainEvent {
  /** Training items done since the run began (over every `train()` call, a resumed run's included). */
  readonly step: number;
  /** Training items of the whole run: epochs × training tasks. */
  readonly totalSteps: number;
  /** Joint actions scored so far (`env_step`, the x-axis of the logs). */
  readonly envStep: number;
  /** The next training item. */
  readonly cursor: DatasetCursor;
}

/** The beginning or end of one training item. */
export interface ItemEvent extends TrainEvent {
  /** The item's epoch (0-based). */
  readonly epoch: number;
  /** The item's index within its epoch (0-based). */
  readonly index: number;
}

/**
 * A step of work a trainer does before its first item (MARLHF's phase 1: the candidates of each
 * training task, then each step of the reward model's fit): `done` of `total` units of `phase`.
 */
export interface PhaseEvent extends TrainEvent {
  /** What the work is, for display, e.g. 'reward model fit'. */
  readonly phase: string;
  readonly done: number;
  readonly total: number;
}

/** An evaluation the loop ran (every `eval_interval` items), with what it logged. */
export interface EvaluateEvent extends TrainEvent {
  readonly metrics: MetricRecord;
}

/** A row of metrics the trainer logged; `envStep` is the row's x value. */
export interface LogEvent extends TrainEvent {
  readonly metrics: MetricRecord;
}

/** A checkpoint written at a callback's request ({@link TrainerControl.save}). */
export interface SaveEvent extends TrainEvent {
  /** Its directory, as `TrainOptions.saveCheckpoint` returned it. */
  readonly dir: string;
}

/**
 * Why `train()` ended: every item of every epoch is done (`finished`), the call's `maxItems` is
 * reached (`max-items`), a callback set {@link TrainerControl.stop} (`stopped`), or it threw (`error`).
 */
export type TrainEndReason = 'finished' | 'max-items' | 'stopped' | 'error';

/** The end of a `train()` call. */
export interface TrainEndEvent extends TrainEvent {
  readonly reason: TrainEndReason;
  /** What was thrown, when `reason` is `error` (`train()` throws it again after the callbacks). */
  readonly error?: unknown;
}

/** Requests from callbacks to the loop, shared by all of them during one `train()` call. */
export interface TrainerControl {
  /**
   * End the run: checked after train begin, after each phase step (the phase is then left
   * unfinished), after each item begin (the item is then skipped) and after each item end (before
   * the epoch's closing work, so the cursor stays where it is and a later `train()` or a resume
   * continues exactly there).
   */
  stop: boolean;
  /**
   * Write a checkpoint once this item's `onItemEnd` callbacks are done (with
   * `TrainOptions.saveCheckpoint`), then send `onSave`. Read and cleared after each item end.
   */
  save: boolean;
}

/**
 * Something that follows a training run. Every method is optional; each receives the event and the
 * shared {@link TrainerControl}, and may be async (the loop waits for it).
 */
export interface TrainerCallback {
  /** Before the first item of this `train()` call (and before its first evaluation). */
  onTrainBegin?(event: TrainEvent, control: TrainerControl): void | Promise<void>;
  /** After each step of a trainer's work before its items (see {@link PhaseEvent}); after train begin. */
  onPhase?(event: PhaseEvent, control: TrainerControl): void | Promise<void>;
  /** Before an item's evaluation (when due) and training. */
  onItemBegin?(event: ItemEvent, control: TrainerControl): void | Promise<void>;
  /** After an evaluation the loop ran (evaluations called directly send none). */
  onEvaluate?(event: EvaluateEvent, control: TrainerControl): void | Promise<void>;
  /** After an item is trained on: the cursor points at the next one. */
  onItemEnd?(event: ItemEvent, control: TrainerControl): void | Promise<void>;
  /** After a checkpoint that {@link TrainerControl.save} asked for is written. */
  onSave?(event: SaveEvent, control: TrainerControl): void | Promise<void>;
  /**
   * After the trainer logs a row of metrics during `train()` (train rows, evaluations, epoch
   * summaries). A callback with `onLog` turns logging on even when the trainer has no logger.
   */
  onLog?(event: LogEvent, control: TrainerControl): void | Promise<void>;
  /** When `train()` ends, however it ends (see {@link TrainEndReason}); in reverse list order. */
  onTrainEnd?(event: TrainEndEvent, control: TrainerControl): void | Promise<void>;
}

/** The callbacks of one `train()` call and their shared control: sends each event to all of them. */
export class CallbackList {
  readonly control: TrainerControl = { stop: false, save: false };
  private readonly callbacks: readonly TrainerCallback[];

  constructor(callbacks: readonly TrainerCallback[]) {
    this.callbacks = [...callbacks];
  }

  /** Whether any callback listens to logged metrics. */
  get listensToLogs(): boolean {
    return this.callbacks.some((cb) => cb.onLog !== undefined);
  }

  /** Sends `onTrainBegin` to every callback, in list order. */
  trainBegin(event: TrainEvent): Promise<void> {
    return this.each(this.callbacks, (cb) => cb.onTrainBegin?.(event, this.control));
  }

  /** Sends `onPhase` to every callback, in list order. */
  phase(event: PhaseEvent): Promise<void> {
    return this.each(this.callbacks, (cb) => cb.onPhase?.(event, this.control));
  }

  /** Sends `onItemBegin` to every callback, in list order. */
  itemBegin(event: ItemEvent): Promise<void> {
    return this.each(this.callbacks, (cb) => cb.onItemBegin?.(event, this.control));
  }

  /** Sends `onEvaluate` to every callback, in list order. */
  evaluate(event: EvaluateEvent): Promise<void> {
    return this.each(this.callbacks, (cb) => cb.onEvaluate?.(event, this.control));
  }

  /** Sends `onItemEnd` to every callback, in list order. */
  itemEnd(event: ItemEvent): Promise<void> {
    return this.each(this.callbacks, (cb) => cb.onItemEnd?.(event, this.control));
  }

  /** Sends `onSave` to every callback, in list order. */
  save(event: SaveEvent): Promise<void> {
    return this.each(this.callbacks, (cb) => cb.onSave?.(event, this.control));
  }

  /** Sends `onLog` to every callback, in list order. */
  log(event: LogEvent): Promise<void> {
    return this.each(this.callbacks, (cb) => cb.onLog?.(event, this.control));
  }

  /** Sends `onTrainEnd` to every callback, in reverse list order. */
  trainEnd(event: TrainEndEvent): Promise<void> {
    return this.each([...this.callbacks].reverse(), (cb) => cb.onTrainEnd?.(event, this.control));
  }

  private async each(callbacks: readonly TrainerCallback[], call: (cb: TrainerCallback) => void | Promise<void>): Promise<void> {
    for (const cb of callbacks) await call(cb);
  }
}
