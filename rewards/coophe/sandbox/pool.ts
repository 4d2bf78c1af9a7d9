/** A counting semaphore: at most `size` sandbox subprocesses run at once. */
export class Pool {
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(readonly size: number) {}

  /** Runs `task` once a slot is free; the slot is released when it settles. */
  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.active >= this.size) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.active++;
    try {
      return await task();
    } finally {
      this.active--;
      this.waiting.shift()?.();
    }
  }

  /** Slots in use. */
  get inUse(): number {
    return this.active;
  }
}
