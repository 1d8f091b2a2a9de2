/**
 * The latest logged re-read per asset as typed columns under open addressing (linear probing,
 * deletion by backward shift): what a reading thread's overlay holds. At 1,000,000 assets an HTTP
 * thread may hold close to 1,000,000 entries: as a `Map` of small objects about 100 bytes each and
 * as many objects for the garbage collector to trace, an object allocated per log row read; here
 * 36 bytes a slot, filled to at most three quarters (48-96 bytes an entry), nothing to trace and
 * nothing allocated per row. Asset ids are positive 32-bit integers; 0 marks a free slot.
 */
export class RereadTable {
  private ids = new Int32Array(0);
  private seqs = new Float64Array(0);
  private visits = new Float64Array(0);
  private seen = new Float64Array(0);
  private counts = new Float64Array(0);
  private bits = 0;
  private count = 0;

  constructor(capacityBits = 10) {
    this.allocate(capacityBits);
  }

  get size(): number {
    return this.count;
  }

  /** The slot that holds `assetId`, or -1. */
  find(assetId: number): number {
    const mask = this.ids.length - 1;
    for (let i = this.home(assetId); ; i = (i + 1) & mask) {
      const id = this.ids[i]!;
      if (id === assetId) return i;
      if (id === 0) return -1;
    }
  }

  seqAt(slot: number): number {
    return this.seqs[slot]!;
  }

  visitAt(slot: number): number {
    return this.visits[slot]!;
  }

  lastSeenAt(slot: number): number {
    return this.seen[slot]!;
  }

  readCountAt(slot: number): number {
    return this.counts[slot]!;
  }

  /** Sets the entry of `assetId` (adds it, or replaces what it held). */
  set(assetId: number, seq: number, visitId: number, lastSeenAt: number, readCount: number): void {
    if ((this.count + 1) * 4 > this.ids.length * 3) this.resize(this.bits + 1);
    const mask = this.ids.length - 1;
    let i = this.home(assetId);
    for (; this.ids[i] !== 0 && this.ids[i] !== assetId; i = (i + 1) & mask);
    if (this.ids[i] === 0) {
      this.ids[i] = assetId;
      this.count++;
    }
    this.seqs[i] = seq;
    this.visits[i] = visitId;
    this.seen[i] = lastSeenAt;
    this.counts[i] = readCount;
  }

  delete(assetId: number): boolean {
    const slot = this.find(assetId);
    if (slot < 0) return false;
    this.clear(slot);
    return true;
  }

  /**
   * Deletes the entries with a seq at or below `through` among up to `most` slots from `from` on;
   * returns the slot to go on from, or -1 once past the last. A sweep may miss an entry that a
   * deletion shifted back across the table's end (it stays until a later sweep).
   */
  prune(from: number, most: number, through: number): number {
    const end = Math.min(this.ids.length, from + most);
    let i = from;
    while (i < end) {
      // A deletion shifts a later entry into this slot: it is looked at before moving on.
      if (this.ids[i] !== 0 && this.seqs[i]! <= through) this.clear(i);
      else i++;
    }
    return end >= this.ids.length ? -1 : end;
  }

  /** Fibonacci hashing: the high bits of the product, so that consecutive ids spread over the table. */
  private home(assetId: number): number {
    return Math.imul(assetId, 0x9e3779b1) >>> (32 - this.bits);
  }

  /** Empties `slot`, moving back the entries after it that would no longer be found past a free slot. */
  private clear(slot: number): void {
    const mask = this.ids.length - 1;
    let hole = slot;
    for (let j = (slot + 1) & mask; this.ids[j] !== 0; j = (j + 1) & mask) {
      const home = this.home(this.ids[j]!);
      // The entry at j stays when its home lies cyclically after the hole, up to j.
      const stays = hole <= j ? home > hole && home <= j : home > hole || home <= j;
      if (stays) continue;
      this.ids[hole] = this.ids[j]!;
      this.seqs[hole] = this.seqs[j]!;
      this.visits[hole] = this.visits[j]!;
      this.seen[hole] = this.seen[j]!;
      this.counts[hole] = this.counts[j]!;
      hole = j;
    }
    this.ids[hole] = 0;
    this.count--;
  }

  private resize(bits: number): void {
    const { ids, seqs, visits, seen, counts } = this;
    this.allocate(bits);
    for (let i = 0; i < ids.length; i++) if (ids[i] !== 0) this.set(ids[i]!, seqs[i]!, visits[i]!, seen[i]!, counts[i]!);
  }

  /** Empty columns of 2^bits slots. */
  private allocate(bits: number): void {
    const capacity = 1 << bits;
    this.bits = bits;
    this.ids = new Int32Array(capacity);
    this.seqs = new Float64Array(capacity);
    this.visits = new Float64Array(capacity);
    this.seen = new Float64Array(capacity);
    this.counts = new Float64Array(capacity);
    this.count = 0;
  }
}
