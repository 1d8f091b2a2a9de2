export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the current window ends (X-RateLimit-Reset and Retry-After). */
  resetSeconds: number;
}

const WINDOW_MS = 60_000;

/**
 * Fixed one-minute windows per API key (per client address before authentication). A window starts
 * with the key's first request; X-RateLimit-Reset is the number of seconds until it ends.
 */
export class RateLimiter {
  private readonly windows = new Map<string, { start: number; count: number }>();
  private lastSweep = 0;

  constructor(readonly limit: number) {}

  take(key: string, now: number): RateDecision {
    let w = this.windows.get(key);
    if (w === undefined || now - w.start >= WINDOW_MS) {
      if (now - this.lastSweep > WINDOW_MS) this.sweep(now);
      w = { start: now, count: 0 };
      this.windows.set(key, w);
    }
    const resetSeconds = Math.max(1, Math.ceil((w.start + WINDOW_MS - now) / 1000));
    if (w.count >= this.limit) return { allowed: false, limit: this.limit, remaining: 0, resetSeconds };
    w.count++;
    return { allowed: true, limit: this.limit, remaining: this.limit - w.count, resetSeconds };
  }

  private sweep(now: number): void {
    this.lastSweep = now;
    for (const [key, w] of this.windows) if (now - w.start >= WINDOW_MS) this.windows.delete(key);
  }
}
