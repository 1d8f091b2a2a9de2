/** Exponential backoff for retry loops: `await backoff.wait()` after a failure, `reset()` after a success. */
export class Backoff {
  private delay: number;

  constructor(
    private readonly firstMs: number,
    private readonly maxMs = 5000,
  ) {
    this.delay = firstMs;
  }

  /** Sleeps the current delay, then doubles it (up to the maximum). */
  async wait(): Promise<void> {
    const ms = this.delay;
    this.delay = Math.min(this.delay * 2, this.maxMs);
    await new Promise((resolve) => setTimeout(resolve, ms));
  }

  reset(): void {
    this.delay = this.firstMs;
  }
}
