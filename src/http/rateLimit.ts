/** One key's window as of one request. `count` includes requests refused in it. */
export interface RateWindow {
  start: number;
  count: number;
}

export const RATE_WINDOW_MS = 60_000;

/** Keys that fit in the shared table; distinct keys beyond it within one window are counted per thread. */
const SLOTS = 1 << 16;
/** How far a key's slot may lie from its hash position. */
const PROBES = 32;
const LOCK = 0;
// Per slot in `ints`: hash A, hash B, count. Window starts (epoch ms) in `starts`.
const INTS_PER_SLOT = 3;

/** Creates the shared memory of one process's rate limits (handed to every HTTP thread). */
export function rateLimitBuffers(): { ints: SharedArrayBuffer; starts: SharedArrayBuffer } {
  return { ints: new SharedArrayBuffer((1 + SLOTS * INTS_PER_SLOT) * 4), starts: new SharedArrayBuffer(SLOTS * 8) };
}

/**
 * Fixed one-minute windows per API key (per client address before authentication). A window starts
 * with the key's first request; X-RateLimit-Reset is the number of seconds until it ends.
 *
 * The windows live in shared memory, one table per process, so a key's budget is the same whatever
 * the number of HTTP threads serving it (a per-thread budget would multiply it). Keys are stored as
 * two 32-bit hashes in an open-addressed table behind one spin lock: each request holds it for a
 * few dozen instructions, far below any contention that matters at HTTP rates. A slot whose window
 * has ended is reused. Should a window's distinct keys overflow the table, the overflow is counted
 * in a per-thread map (documented limit: budgets then hold per thread for those keys).
 *
 * Hand-written: the libraries (rate-limiter-flexible, limiter) keep their windows in one thread's
 * heap or in Redis; neither shares a budget across worker threads without a round trip.
 */
export class RateLimiter {
  private readonly ints: Int32Array;
  private readonly starts: Float64Array;
  private readonly overflow = new Map<string, RateWindow>();

  constructor(
    readonly limit: number,
    buffers = rateLimitBuffers(),
  ) {
    this.ints = new Int32Array(buffers.ints);
    this.starts = new Float64Array(buffers.starts);
  }

  take(key: string, now: number): RateWindow {
    const a = hashA(key);
    const b = hashB(key) | 1; // never 0 with a: (0, 0) marks a free slot
    const home = a & (SLOTS - 1);
    this.lock();
    try {
      let reusable = -1;
      for (let i = 0; i < PROBES; i++) {
        const slot = (home + i) & (SLOTS - 1);
        const at = 1 + slot * INTS_PER_SLOT;
        // Slots are within the typed arrays by construction (masked by SLOTS - 1).
        const ended = now - this.starts[slot]! >= RATE_WINDOW_MS;
        if (this.ints[at] === a && this.ints[at + 1] === b) {
          if (ended) {
            this.starts[slot] = now;
            this.ints[at + 2] = 0;
          }
          const count = ++this.ints[at + 2]!;
          return { start: this.starts[slot]!, count };
        }
        if (reusable < 0 && (ended || (this.ints[at] === 0 && this.ints[at + 1] === 0))) reusable = slot;
      }
      if (reusable >= 0) {
        const at = 1 + reusable * INTS_PER_SLOT;
        this.ints[at] = a;
        this.ints[at + 1] = b;
        this.ints[at + 2] = 1;
        this.starts[reusable] = now;
        return { start: now, count: 1 };
      }
    } finally {
      this.unlock();
    }
    return this.takeOverflow(key, now);
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
    return Math.max(s, 1);
  }

  private lock(): void {
    while (Atomics.compareExchange(this.ints, LOCK, 0, 1) !== 0);
  }

  private unlock(): void {
    Atomics.store(this.ints, LOCK, 0);
  }

  private takeOverflow(key: string, now: number): RateWindow {
    let w = this.overflow.get(key);
    if (w === undefined || now - w.start >= RATE_WINDOW_MS) {
      if (this.overflow.size >= SLOTS) this.overflow.clear();
      w = { start: now, count: 0 };
      this.overflow.set(key, w);
    }
    w.count++;
    return { start: w.start, count: w.count };
  }
}

/** FNV-1a over UTF-16 code units. */
function hashA(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return h | 0;
}

/** A second, independent 32-bit hash (murmur-style mixing), so two keys share a slot identity only when both collide. */
function hashB(key: string): number {
  let h = 0x9747b28c ^ key.length;
  for (let i = 0; i < key.length; i++) {
    h = Math.imul(h ^ key.charCodeAt(i), 0x5bd1e995);
    h ^= h >>> 13;
  }
  return h | 0;
}
