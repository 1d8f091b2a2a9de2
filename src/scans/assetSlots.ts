/**
 * Open addressing keyed by asset id (linear probing, deletion by backward shift, at most three
 * quarters full): the placement shared by the typed tables of the scan path (rereadTable.ts,
 * positionTable.ts). A slot's values are a row of `stride` numbers in one Float64Array: a batch
 * reads and writes every value of about 95,000 entries spread over 1,000,000, and as a column per
 * value each access was a cache miss of its own. Asset ids are positive 32-bit integers; 0 marks a
 * free slot.
 */
export abstract class AssetSlots {
  protected ids = new Int32Array(0);
  /** Slot i's values at i * stride .. i * stride + stride - 1. */
  protected rows = new Float64Array(0);
  private bits = 0;
  private count = 0;
  private moved = 0;

  constructor(
    capacityBits: number,
    private readonly stride: number,
  ) {
    this.allocate(capacityBits);
  }

  get size(): number {
    return this.count;
  }

  /** Changes whenever an entry may have moved to another slot (a deletion's shift, a resize): a slot from find() holds while it stays. */
  get layout(): number {
    return this.moved;
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

  /** The slot of `assetId`, taken (and counted) when it was free; grows the table first when it would pass three quarters. */
  protected claim(assetId: number): number {
    if ((this.count + 1) * 4 > this.ids.length * 3) this.resize(this.bits + 1);
    return this.slotOf(assetId);
  }

  /** Empties `slot`, moving back the entries after it that would no longer be found past a free slot. */
  protected clear(slot: number): void {
    this.moved++;
    const mask = this.ids.length - 1;
    let hole = slot;
    for (let j = (slot + 1) & mask; this.ids[j] !== 0; j = (j + 1) & mask) {
      const home = this.home(this.ids[j]!);
      // The entry at j stays when its home lies cyclically after the hole, up to j.
      const stays = hole <= j ? home > hole && home <= j : home > hole || home <= j;
      if (stays) continue;
      this.ids[hole] = this.ids[j]!;
      this.copySlot(this.rows, j, hole);
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
    this.moved++;
    const { ids, rows } = this;
    this.allocate(bits);
    for (let i = 0; i < ids.length; i++) if (ids[i] !== 0) this.copySlot(rows, i, this.slotOf(ids[i]!));
  }

  /** Copies slot `from` of `source` (this table's rows, or the ones a resize left) to slot `to` of this table's. */
  private copySlot(source: Float64Array, from: number, to: number): void {
    const { stride } = this;
    for (let f = 0; f < stride; f++) this.rows[to * stride + f] = source[from * stride + f]!;
  }

  private allocate(bits: number): void {
    const capacity = 1 << bits;
    this.bits = bits;
    this.ids = new Int32Array(capacity);
    this.rows = new Float64Array(capacity * this.stride);
    this.count = 0;
  }
}
