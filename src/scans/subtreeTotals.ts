import { MAX_DEPTH } from '../locations/store.js';

/** A location's place in the tree as the subtree walk sees it: its parent, and whether the walk passes through it. */
export interface TreeLink {
  parent: number | null;
  /** Not soft-deleted: a deleted location's assets count for itself but not for its ancestors. */
  live: boolean;
}

/**
 * Per location, the live positions at it and at every live location below it reached through live
 * locations: what the console's tree shows as "in subtree" (the report filtered by the location's
 * subtree walk, store.ts `subtree`, which stops at deleted locations), kept as positions come and
 * go, so that a count is one map read and a move costs one walk up its location's ancestors.
 */
export class SubtreeTotals {
  private readonly totals = new Map<number, number>();

  constructor(private readonly linkOf: (locationId: number) => TreeLink | undefined) {}

  /** `by` positions more (or fewer) at `locationId`: it and the ancestors its assets count for follow. */
  add(locationId: number, by: number): void {
    let id: number | null = locationId;
    for (let depth = 0; id !== null && depth < MAX_DEPTH; depth++) {
      const n = (this.totals.get(id) ?? 0) + by;
      if (n === 0) this.totals.delete(id);
      else this.totals.set(id, n);
      const link = this.linkOf(id);
      if (link === undefined || !link.live) break;
      id = link.parent;
    }
  }

  get(locationId: number): number {
    return this.totals.get(locationId) ?? 0;
  }
}
