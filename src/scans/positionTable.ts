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

/** A position for get() to copy into, with `stored` (whether its scan_positions row exists) false. */
function blankPosition(): StoredPosition & { stored: boolean } {
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

/** A slot's row (assetSlots.ts): 64 bytes, one cache line. */
const STATE = 0;
const ORG = 1;
const LOCATION = 2;
const SEEN = 3;
const VISIT = 4;
const STARTED = 5;
const READS = 6;
const VISIT_COUNT = 7;
const STRIDE = 8;

/**
 * The positions a shard's scan writer keeps in memory (of each asset it has met, or that it has
 * none) as typed rows (placement: assetSlots.ts), 68 bytes a slot. At 1,000,000 assets a `Map`
 * of one object per position (each timestamp a boxed double) was most of the shard thread's live
 * heap, 302-348 MB against 134-161 MB with typed arrays (docs/field-rereads.md).
 */
export class PositionTable extends AssetSlots {
  /** Where the next trimTo() starts sweeping. */
  private sweepFrom = 0;

  constructor(capacityBits = 10) {
    super(capacityBits, STRIDE);
  }

  /** Whether the asset is known: placed, or known to have no position. */
  has(assetId: number): boolean {
    return this.find(assetId) >= 0;
  }

  /** A copy of the asset's committed position (`stored`); null when it has none; undefined when the asset is not known. */
  get(assetId: number): (StoredPosition & { stored: boolean }) | null | undefined {
    const i = this.find(assetId);
    if (i < 0) return undefined;
    if (this.rows[i * STRIDE + STATE] === UNPLACED) return null;
    const p = blankPosition();
    this.copyTo(i, p);
    p.stored = true;
    return p;
  }

  /** Copies the position at `slot` (from find(); placed) into `target`. */
  copyTo(slot: number, target: StoredPosition): void {
    const r = this.rows;
    const at = slot * STRIDE;
    target.assetId = this.ids[slot]!;
    target.orgId = r[at + ORG]!;
    target.locationId = r[at + LOCATION]!;
    target.lastSeenAt = r[at + SEEN]!;
    target.visitId = r[at + VISIT]!;
    target.visitStartedAt = r[at + STARTED]!;
    target.visitReadCount = r[at + READS]!;
    target.visitCount = r[at + VISIT_COUNT]!;
  }

  /** Whether `slot` (from find()) holds a position, not "none". */
  placedAt(slot: number): boolean {
    return this.rows[slot * STRIDE + STATE] === PLACED;
  }

  locationAt(slot: number): number {
    return this.rows[slot * STRIDE + LOCATION]!;
  }

  seenAt(slot: number): number {
    return this.rows[slot * STRIDE + SEEN]!;
  }

  visitAt(slot: number): number {
    return this.rows[slot * STRIDE + VISIT]!;
  }

  visitStartAt(slot: number): number {
    return this.rows[slot * STRIDE + STARTED]!;
  }

  visitCountAt(slot: number): number {
    return this.rows[slot * STRIDE + VISIT_COUNT]!;
  }

  /** Sets the asset's position (its fields are copied), or (null) that it has none. */
  set(assetId: number, p: StoredPosition | null): void {
    const i = this.claim(assetId);
    if (p === null) this.rows[i * STRIDE + STATE] = UNPLACED;
    else this.setAt(i, p);
  }

  /** Sets the position at slot `i` (from find(): the slot of p's asset), its fields copied. */
  setAt(i: number, p: StoredPosition): void {
    const r = this.rows;
    const at = i * STRIDE;
    r[at + STATE] = PLACED;
    r[at + ORG] = p.orgId;
    r[at + LOCATION] = p.locationId;
    r[at + SEEN] = p.lastSeenAt;
    r[at + VISIT] = p.visitId;
    r[at + STARTED] = p.visitStartedAt;
    r[at + READS] = p.visitReadCount;
    r[at + VISIT_COUNT] = p.visitCount;
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
}
