import type { ControlPlane } from '../control/controlPlane.js';

/** How coarse a key's last use is: a key is written at most once per this span (per thread, and by the conditional update across them). */
export const KEY_USE_GRAIN_MS = 60_000;
/** Keys remembered per thread; past it the oldest is forgotten (it is then written again on its next use, a minute early at worst). */
const REMEMBERED = 10_000;

/**
 * When each API key was last used, recorded coarsely and off the request path: a request costs a
 * map lookup; a key's use is queued at most once a minute per thread and written, with the others
 * queued, in one transaction by the thread's timer (the revocation poll's, every 200 ms).
 */
export class KeyUse {
  private readonly queuedAt = new Map<string, number>();
  private pending = new Map<string, number>();

  constructor(private readonly control: ControlPlane) {}

  /** A request authenticated with the key at `now`. */
  seen(keyId: string, now: number): void {
    const last = this.queuedAt.get(keyId);
    if (last !== undefined && now - last < KEY_USE_GRAIN_MS) return;
    if (last === undefined && this.queuedAt.size >= REMEMBERED) this.queuedAt.delete(this.queuedAt.keys().next().value as string);
    this.queuedAt.set(keyId, now);
    this.pending.set(keyId, now);
  }

  /** Writes the queued uses; on failure they stay queued for the next call. */
  flush(): void {
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    try {
      this.control.recordKeyUse([...batch], KEY_USE_GRAIN_MS);
    } catch (err) {
      for (const [id, at] of batch) if (!this.pending.has(id)) this.pending.set(id, at);
      throw err;
    }
  }
}
