import { AssetSlots } from './assetSlots.js';

/** A slot's row (assetSlots.ts): 32 bytes, two slots a cache line. */
const SEQ = 0;
const VISIT = 1;
const SEEN = 2;
const COUNT = 3;
const STRIDE = 4;

/**
 * The latest logged re-read per asset as typed rows (placement: assetSlots.ts): what every
 * overlay holds (the writer's, a reading thread's, an export's). At 1,000,000 assets an HTTP
 * thread may hold close to 1,000,000 entries: as a `Map` of small objects about 100 bytes each and
 * as many objects for the garbage collector to trace, an object allocated per log row read; here
 * 36 bytes a slot, filled to at most three quarters (48-96 bytes an entry), nothing to trace and
 * nothing allocated per row.
 */
export class RereadTable extends AssetSlots {
  constructor(capacityBits = 10) {
    super(capacityBits, STRIDE);
  }

  seqAt(slot: number): number {
    return this.rows[slot * STRIDE + SEQ]!;
  }

  visitAt(slot: number): number {
    return this.rows[slot * STRIDE + VISIT]!;
  }

  lastSeenAt(slot: number): number {
    return this.rows[slot * STRIDE + SEEN]!;
  }

  readCountAt(slot: number): number {
    return this.rows[slot * STRIDE + COUNT]!;
  }

  /** Sets the entry of `assetId` (adds it, or replaces what it held). */
  set(assetId: number, seq: number, visitId: number, lastSeenAt: number, readCount: number): void {
    const i = this.claim(assetId);
    const r = this.rows;
    const at = i * STRIDE;
    r[at + SEQ] = seq;
    r[at + VISIT] = visitId;
    r[at + SEEN] = lastSeenAt;
    r[at + COUNT] = readCount;
  }

  /**
   * Deletes the entries with a seq at or below `through` among up to `most` slots from `from` on;
   * returns the slot to go on from, or -1 once past the last. A sweep may miss an entry that a
   * deletion shifted back across the table's end (it stays until a later sweep).
   */
  prune(from: number, most: number, through: number): number {
    const end = Math.min(this.capacity, from + most);
    let i = from;
    while (i < end) {
      // A deletion shifts a later entry into this slot: it is looked at before moving on.
      if (this.ids[i] !== 0 && this.rows[i * STRIDE + SEQ]! <= through) this.clear(i);
      else i++;
    }
    return end >= this.capacity ? -1 : end;
  }
}
