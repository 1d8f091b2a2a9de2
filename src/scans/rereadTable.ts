import { AssetSlots } from './assetSlots.js';

interface RereadColumns {
  seqs: Float64Array;
  visits: Float64Array;
  seen: Float64Array;
  counts: Float64Array;
}

/**
 * The latest logged re-read per asset as typed columns (placement: assetSlots.ts): what every
 * overlay holds (the writer's, a reading thread's, an export's). At 1,000,000 assets an HTTP
 * thread may hold close to 1,000,000 entries: as a `Map` of small objects about 100 bytes each and
 * as many objects for the garbage collector to trace, an object allocated per log row read; here
 * 36 bytes a slot, filled to at most three quarters (48-96 bytes an entry), nothing to trace and
 * nothing allocated per row.
 */
export class RereadTable extends AssetSlots<RereadColumns> {
  constructor(capacityBits = 10) {
    super(capacityBits);
  }

  seqAt(slot: number): number {
    return this.columns.seqs[slot]!;
  }

  visitAt(slot: number): number {
    return this.columns.visits[slot]!;
  }

  lastSeenAt(slot: number): number {
    return this.columns.seen[slot]!;
  }

  readCountAt(slot: number): number {
    return this.columns.counts[slot]!;
  }

  /** Sets the entry of `assetId` (adds it, or replaces what it held). */
  set(assetId: number, seq: number, visitId: number, lastSeenAt: number, readCount: number): void {
    const i = this.claim(assetId);
    const c = this.columns;
    c.seqs[i] = seq;
    c.visits[i] = visitId;
    c.seen[i] = lastSeenAt;
    c.counts[i] = readCount;
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
      if (this.ids[i] !== 0 && this.columns.seqs[i]! <= through) this.clear(i);
      else i++;
    }
    return end >= this.capacity ? -1 : end;
  }

  protected columnsFor(capacity: number): RereadColumns {
    return {
      seqs: new Float64Array(capacity),
      visits: new Float64Array(capacity),
      seen: new Float64Array(capacity),
      counts: new Float64Array(capacity),
    };
  }

  protected copySlot(source: RereadColumns, from: number, to: number): void {
    const c = this.columns;
    c.seqs[to] = source.seqs[from]!;
    c.visits[to] = source.visits[from]!;
    c.seen[to] = source.seen[from]!;
    c.counts[to] = source.counts[from]!;
  }
}
