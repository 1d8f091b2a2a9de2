import { AssetSlots } from './assetSlots.js';

/** A committed position as the table stores it: current location and open visit of an asset. */
export interface StoredPosition {
  assetId: number;
  orgId: number;
  locationId: number;
  lastSeenAt: number;
  visitId: number;
  visitStartedAt: number;
  visitReadCount: number;
  /** The asset's visits (its scan_history rows): history's total_count without counting them. */
  visitCount: number;
}

/** A position to copy into (PositionTable.copyTo), with `stored` (whether its scan_positions row exists) false. */
export function blankPosition(): StoredPosition & { stored: boolean } {
  return {
    assetId: 0,
    orgId: 0,
    locationId: 0,
    lastSeenAt: 0,
    visitId: 0,
    visitStartedAt: 0,
    visitReadCount: 0,
    visitCount: 0,
    stored: false,
  };
}

const PLACED = 1;
/** The asset has no position (never scanned): remembered so that it is not looked up again. */
const UNPLACED = 2;

interface PositionColumns {
  states: Uint8Array;
  orgs: Float64Array;
  locations: Float64Array;
  seen: Float64Array;
  visits: Float64Array;
  started: Float64Array;
  reads: Float64Array;
  visitCounts: Float64Array;
}

/**
 * The positions a shard's scan writer keeps in memory (of each asset it has met, or that it has
 * none) as typed columns (placement: assetSlots.ts), 61 bytes a slot. At 1,000,000 assets a `Map`
 * of one object per position (each timestamp a boxed double) was most of the shard thread's live
 * heap, 302-348 MB against 134-161 MB with the columns (docs/field-rereads.md).
 */
export class PositionTable extends AssetSlots<PositionColumns> {
  /** Where the next trimTo() starts sweeping. */
  private sweepFrom = 0;

  constructor(capacityBits = 10) {
    super(capacityBits);
  }

  /** Whether the asset is known: placed, or known to have no position. */
  has(assetId: number): boolean {
    return this.find(assetId) >= 0;
  }

  /** A copy of the asset's committed position (`stored`); null when it has none; undefined when the asset is not known. */
  get(assetId: number): (StoredPosition & { stored: boolean }) | null | undefined {
    const i = this.find(assetId);
    if (i < 0) return undefined;
    if (this.columns.states[i] === UNPLACED) return null;
    const p = blankPosition();
    this.copyTo(i, p);
    p.stored = true;
    return p;
  }

  /** Copies the position at `slot` (from find(); placed) into `target`. */
  copyTo(slot: number, target: StoredPosition): void {
    const c = this.columns;
    target.assetId = this.ids[slot]!;
    target.orgId = c.orgs[slot]!;
    target.locationId = c.locations[slot]!;
    target.lastSeenAt = c.seen[slot]!;
    target.visitId = c.visits[slot]!;
    target.visitStartedAt = c.started[slot]!;
    target.visitReadCount = c.reads[slot]!;
    target.visitCount = c.visitCounts[slot]!;
  }

  /** Whether `slot` (from find()) holds a position, not "none". */
  placedAt(slot: number): boolean {
    return this.columns.states[slot] === PLACED;
  }

  locationAt(slot: number): number {
    return this.columns.locations[slot]!;
  }

  seenAt(slot: number): number {
    return this.columns.seen[slot]!;
  }

  visitAt(slot: number): number {
    return this.columns.visits[slot]!;
  }

  visitStartAt(slot: number): number {
    return this.columns.started[slot]!;
  }

  visitCountAt(slot: number): number {
    return this.columns.visitCounts[slot]!;
  }

  /** Sets the asset's position (its fields are copied), or (null) that it has none. */
  set(assetId: number, p: StoredPosition | null): void {
    const i = this.claim(assetId);
    if (p === null) this.columns.states[i] = UNPLACED;
    else this.setAt(i, p);
  }

  /** Sets the position at slot `i` (from find(): the slot of p's asset), its fields copied. */
  setAt(i: number, p: StoredPosition): void {
    const c = this.columns;
    c.states[i] = PLACED;
    c.orgs[i] = p.orgId;
    c.locations[i] = p.locationId;
    c.seen[i] = p.lastSeenAt;
    c.visits[i] = p.visitId;
    c.started[i] = p.visitStartedAt;
    c.reads[i] = p.visitReadCount;
    c.visitCounts[i] = p.visitCount;
  }

  /**
   * Drops entries until at most `keep` remain, sweeping on from where the last trim stopped, so
   * that successive trims do not drop the same region first. Every entry is a copy of committed
   * rows, reloaded when its asset is next scanned.
   */
  trimTo(keep: number): void {
    const mask = this.capacity - 1;
    let i = this.sweepFrom & mask;
    while (this.size > keep) {
      // A deletion shifts a later entry into this slot: it goes too.
      if (this.ids[i] !== 0) this.clear(i);
      else i = (i + 1) & mask;
    }
    this.sweepFrom = i;
  }

  protected columnsFor(capacity: number): PositionColumns {
    return {
      states: new Uint8Array(capacity),
      orgs: new Float64Array(capacity),
      locations: new Float64Array(capacity),
      seen: new Float64Array(capacity),
      visits: new Float64Array(capacity),
      started: new Float64Array(capacity),
      reads: new Float64Array(capacity),
      visitCounts: new Float64Array(capacity),
    };
  }

  protected copySlot(source: PositionColumns, from: number, to: number): void {
    const c = this.columns;
    c.states[to] = source.states[from]!;
    c.orgs[to] = source.orgs[from]!;
    c.locations[to] = source.locations[from]!;
    c.seen[to] = source.seen[from]!;
    c.visits[to] = source.visits[from]!;
    c.started[to] = source.started[from]!;
    c.reads[to] = source.reads[from]!;
    c.visitCounts[to] = source.visitCounts[from]!;
  }
}
