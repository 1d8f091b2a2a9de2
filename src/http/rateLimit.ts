/** One key's current window. `count` includes requests refused in it. */
export interface RateWindow {
  start: number;
  count: number;
}

export const RATE_WINDOW_MS = 60_000;

/**
 * Fixed one-minute windows per API key (per client address before authentication). A window starts
 * with the key's first request; X-RateLimit-Reset is the number of seconds until it ends.
 * `take` returns the key's live window record (no allocation except when a window starts).
 */
export class RateLimiter {
  private readonly windows = new Map<string, RateWindow>();
  private lastSweep = 0;

  constructor(readonly limit: number) {}

  take(key: string, now: number): RateWindow {
    let w = this.windows.get(key);
    if (w === undefined || now - w.start >= RATE_WINDOW_MS) {
      if (now - this.lastSweep > RATE_WINDOW_MS) this.sweep(now);
      w = { start: now, count: 0 };
      this.windows.set(key, w);
    }
    w.count++;
    return w;
  }

  allowed(w: RateWindow): boolean {
    return w.count <= this.limit;
  }

  remaining(w: RateWindow): number {
    return w.count >= this.limit ? 0 : this.limit - w.count;
  }

  /** Whole seconds until the window ends, at least 1 (X-RateLimit-Reset and Retry-After). */
  resetSeconds(w: RateWindow, now: number): number {
    const s = Math.ceil((w.start + RATE_WINDOW_MS - now) / 1000);
    return s < 1 ? 1 : s;
  }

  private sweep(now: number): void {
    this.lastSweep = now;
    for (const [key, w] of this.windows) if (now - w.start >= RATE_WINDOW_MS) this.windows.delete(key);
  }
}
