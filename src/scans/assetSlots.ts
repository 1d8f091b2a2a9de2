/**
 * Open addressing keyed by asset id (linear probing, deletion by backward shift, at most three
 * quarters full): the placement shared by the typed-column tables of the scan path (rereadTable.ts,
 * positionTable.ts). Subclasses keep their columns and say how a slot's values move. Asset ids are
 * positive 32-bit integers; 0 marks a free slot.
 */
export abstract class AssetSlots<Columns> {
  protected ids = new Int32Array(0);
  protected columns!: Columns;
  private bits = 0;
  private count = 0;

  constructor(capacityBits: number) {
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

  /** Calls `fn` with every asset id held, in slot order. */
  forEachId(fn: (assetId: number) => void): void {
    for (let i = 0; i < this.ids.length; i++) if (this.ids[i] !== 0) fn(this.ids[i]!);
  }

  delete(assetId: number): boolean {
    const slot = this.find(assetId);
    if (slot < 0) return false;
    this.clear(slot);
    return true;
  }

  /** Empty columns for `capacity` slots. */
  protected abstract columnsFor(capacity: number): Columns;

  /** Copies slot `from` of `source` (this table's columns, or the ones a resize left) to slot `to` of this table's. */
  protected abstract copySlot(source: Columns, from: number, to: number): void;

  /** The slot of `assetId`, taken (and counted) when it was free; grows the table first when it would pass three quarters. */
  protected claim(assetId: number): number {
    if ((this.count + 1) * 4 > this.ids.length * 3) this.resize(this.bits + 1);
    return this.slotOf(assetId);
  }

  /** Empties `slot`, moving back the entries after it that would no longer be found past a free slot. */
  protected clear(slot: number): void {
    const mask = this.ids.length - 1;
    let hole = slot;
    for (let j = (slot + 1) & mask; this.ids[j] !== 0; j = (j + 1) & mask) {
      const home = this.home(this.ids[j]!);
      // The entry at j stays when its home lies cyclically after the hole, up to j.
      const stays = hole <= j ? home > hole && home <= j : home > hole || home <= j;
      if (stays) continue;
      this.ids[hole] = this.ids[j]!;
      this.copySlot(this.columns, j, hole);
      hole = j;
    }
    this.ids[hole] = 0;
    this.count--;
  }

  protected get capacity(): number {
    return this.ids.length;
  }

  private slotOf(assetId: number): number {
    const mask = this.ids.length - 1;
    let i = this.home(assetId);
    for (; this.ids[i] !== 0 && this.ids[i] !== assetId; i = (i + 1) & mask);
    if (this.ids[i] === 0) {
      this.ids[i] = assetId;
      this.count++;
    }
    return i;
  }

  /** Fibonacci hashing: the high bits of the product, so that consecutive ids spread over the table. */
  private home(assetId: number): number {
    return Math.imul(assetId, 0x9e3779b1) >>> (32 - this.bits);
  }

  private resize(bits: number): void {
    const { ids, columns } = this;
    this.allocate(bits);
    for (let i = 0; i < ids.length; i++) if (ids[i] !== 0) this.copySlot(columns, i, this.slotOf(ids[i]!));
  }

  private allocate(bits: number): void {
    const capacity = 1 << bits;
    this.bits = bits;
    this.ids = new Int32Array(capacity);
    this.columns = this.columnsFor(capacity);
    this.count = 0;
  }
}
