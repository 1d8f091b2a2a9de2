/**
 * A read that may stall without an error (an ordered consumer placed on a nats-server that died,
 * before 2.12): `onIdle` runs once nothing has touched the watch for `ms`, and `fired` says so.
 */
export class IdleWatch {
  private timer: NodeJS.Timeout | undefined;
  fired = false;

  constructor(
    private readonly ms: number,
    private readonly onIdle: () => void,
  ) {
    this.touch();
  }

  /** Something came: the wait starts over. */
  touch(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.fired = true;
      this.onIdle();
    }, this.ms);
  }

  /** Not waiting (the caller holds the data, or is done). */
  stop(): void {
    clearTimeout(this.timer);
  }

  /** The error a stalled read ends with: a TimeoutError, which the readers' callers retry. */
  timeout(what: string): Error {
    const err = new Error(`${what}: nothing came for ${this.ms / 1000} s`);
    err.name = 'TimeoutError';
    return err;
  }
}
