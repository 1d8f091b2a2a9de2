/**
 * The visit rules (how a read of an asset at a location changes its current position and history),
 * as pure decisions over the figures of its open visit. The store (apply.ts) carries them out in SQL.
 */

/** The current location of an asset and its open visit (its latest history event). */
export interface OpenVisit {
  locationId: number;
  lastSeenAt: number;
  visitStartedAt: number;
  visitReadCount: number;
}

export type VisitStep =
  /** The asset's first read: its first visit opens. */
  | { kind: 'first' }
  /** A read at the open visit's location within the gap: the open visit extends to it. */
  | { kind: 'extend' }
  /**
   * A newer read elsewhere, or past the gap: a new visit opens and becomes the current location.
   * `closeOpen`: the open visit's history row must first get the figures kept on the position
   * (it was extended since it was written).
   */
  | { kind: 'move'; closeOpen: boolean }
  /** An older read inside the open visit, at its location: it counts toward the open visit only. */
  | { kind: 'countInOpen' }
  /** An older read elsewhere: history only; it may extend the visit just before it (see extendsEarlier). */
  | { kind: 'late' };

/** What a read at `locationId`, observed at `t`, does to an asset whose open visit is `open`. */
export function visitStep(open: OpenVisit | undefined, t: number, locationId: number, gapMs: number): VisitStep {
  if (open === undefined) return { kind: 'first' };
  if (t >= open.lastSeenAt) {
    if (gapMs > 0 && locationId === open.locationId && t - open.lastSeenAt <= gapMs) return { kind: 'extend' };
    return { kind: 'move', closeOpen: open.visitReadCount !== 1 || open.lastSeenAt !== open.visitStartedAt };
  }
  if (gapMs > 0 && t >= open.visitStartedAt && locationId === open.locationId) return { kind: 'countInOpen' };
  return { kind: 'late' };
}

/**
 * For a late read: whether it extends the closed visit just before it (same location, within the
 * gap), rather than standing as a visit of its own.
 */
export function extendsEarlier(
  before: { id: number; locationId: number; lastSeenAt: number } | undefined,
  openVisitId: number,
  t: number,
  locationId: number,
  gapMs: number,
): boolean {
  return (
    gapMs > 0 && before !== undefined && before.id !== openVisitId && before.locationId === locationId && t - before.lastSeenAt <= gapMs
  );
}
