/**
 * An ordered set of (key, id) pairs that answers "the ids at ranks k..k+n" in O(√n + n) without
 * walking the first k: the report's offset paging at any offset. Entries sit in sorted blocks of at
 * most blockSize entries (two parallel typed arrays each); a block's length is its subtree count, so a
 * rank is found by summing block lengths, then indexing inside one block. Insert and remove are a
 * binary search over block heads plus a typed-array shift inside one block.
 *
 * Chosen over a balanced tree with subtree counts by measurement (bench/probes/rankIndex.ts): at
 * 1,000,000 entries the blocks take about 16 bytes per entry and a move (remove + insert) or a
 * page lookup at any offset costs microseconds, with no per-entry object for the GC to trace.
 *
 * Order: key descending, then id descending (the report's default `-asset_last_seen` with its
 * tiebreak following the last term's direction); `ascending` reverses both.
 */
class Block {
  keys: Float64Array;
  ids: Float64Array;
  length = 0;

  constructor(capacity: number) {
    this.keys = new Float64Array(capacity);
    this.ids = new Float64Array(capacity);
  }

  /** Doubles the arrays (a block starts small: most indexes, one per location, hold a handful of entries). */
  grow(max: number): void {
    const capacity = Math.min(max, this.keys.length * 2);
    const keys = new Float64Array(capacity);
    const ids = new Float64Array(capacity);
    keys.set(this.keys.subarray(0, this.length));
    ids.set(this.ids.subarray(0, this.length));
    this.keys = keys;
    this.ids = ids;
  }
}

const FIRST_BLOCK_CAPACITY = 8;

export class RankIndex {
  private readonly blocks: Block[];
  private total = 0;

  /** `blockSize` is for tests, which use tiny blocks so that every sequence splits and empties some. */
  constructor(
    private readonly ascending = false,
    private readonly blockSize = 1024,
  ) {
    this.blocks = [new Block(Math.min(FIRST_BLOCK_CAPACITY, blockSize))];
  }

  get size(): number {
    return this.total;
  }

  /** Whether (ka, ia) comes before (kb, ib) in this index's order. */
  before(ka: number, ia: number, kb: number, ib: number): boolean {
    return this.compare(ka, ia, kb, ib) < 0;
  }

  /** Negative when (ka, ia) comes before (kb, ib) in this index's order. */
  private compare(ka: number, ia: number, kb: number, ib: number): number {
    const c = ka !== kb ? kb - ka : ib - ia;
    return this.ascending ? -c : c;
  }

  /** The block that holds, or would hold, (key, id): the last block whose first entry is not after it. */
  private blockFor(key: number, id: number): number {
    let lo = 0;
    let hi = this.blocks.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      const b = this.blocks[mid]!;
      if (this.compare(b.keys[0]!, b.ids[0]!, key, id) <= 0) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /** The position of the first entry of `b` not before (key, id). */
  private positionIn(b: Block, key: number, id: number): number {
    let lo = 0;
    let hi = b.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.compare(b.keys[mid]!, b.ids[mid]!, key, id) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  insert(key: number, id: number): void {
    const bi = this.blockFor(key, id);
    const b = this.blocks[bi]!;
    const at = this.positionIn(b, key, id);
    if (at < b.length && b.keys[at] === key && b.ids[at] === id) return;
    if (b.length === b.keys.length) b.grow(this.blockSize);
    b.keys.copyWithin(at + 1, at, b.length);
    b.ids.copyWithin(at + 1, at, b.length);
    b.keys[at] = key;
    b.ids[at] = id;
    b.length++;
    this.total++;
    if (b.length === this.blockSize) this.split(bi);
  }

  /** Removes (key, id); false when it was not there. */
  remove(key: number, id: number): boolean {
    const bi = this.blockFor(key, id);
    const b = this.blocks[bi]!;
    const at = this.positionIn(b, key, id);
    if (at >= b.length || b.keys[at] !== key || b.ids[at] !== id) return false;
    b.keys.copyWithin(at, at + 1, b.length);
    b.ids.copyWithin(at, at + 1, b.length);
    b.length--;
    this.total--;
    if (b.length === 0 && this.blocks.length > 1) this.blocks.splice(bi, 1);
    return true;
  }

  /** The ids at ranks offset..offset+limit-1 (fewer at the end). */
  page(offset: number, limit: number): number[] {
    return this.entries(offset, limit).ids;
  }

  /** The entries at ranks offset..offset+limit-1 (fewer at the end), ids and keys side by side. */
  entries(offset: number, limit: number): { ids: number[]; keys: number[] } {
    const ids: number[] = [];
    const keys: number[] = [];
    let bi = 0;
    let skip = offset;
    while (bi < this.blocks.length && skip >= this.blocks[bi]!.length) skip -= this.blocks[bi++]!.length;
    for (; bi < this.blocks.length && ids.length < limit; bi++, skip = 0) {
      const b = this.blocks[bi]!;
      for (let i = skip; i < b.length && ids.length < limit; i++) {
        ids.push(b.ids[i]!);
        keys.push(b.keys[i]!);
      }
    }
    return { ids, keys };
  }

  /** How many entries come before (key, id) in this index's order. */
  rankOf(key: number, id: number): number {
    const bi = this.blockFor(key, id);
    let rank = 0;
    for (let i = 0; i < bi; i++) rank += this.blocks[i]!.length;
    return rank + this.positionIn(this.blocks[bi]!, key, id);
  }

  /** Bytes held by the typed arrays. */
  bytes(): number {
    let bytes = 0;
    for (const b of this.blocks) bytes += b.keys.byteLength + b.ids.byteLength;
    return bytes;
  }

  private split(bi: number): void {
    const b = this.blocks[bi]!;
    const half = b.length >> 1;
    const right = new Block(this.blockSize);
    right.keys.set(b.keys.subarray(half, b.length));
    right.ids.set(b.ids.subarray(half, b.length));
    right.length = b.length - half;
    b.length = half;
    this.blocks.splice(bi + 1, 0, right);
  }
}

/**
 * The entries at ranks offset..offset+limit-1 of the union of two disjoint indexes of one order, in
 * O(√n · log m + limit) where m is the smaller: how many of the first `offset` come from `small` is
 * found by binary search (each probe ranks one of its entries in `large`), then the two runs merge.
 */
export function unionEntries(large: RankIndex, small: RankIndex, offset: number, limit: number): { ids: number[]; keys: number[] } {
  // fromSmall(i): true when `small`'s i-th entry comes before the union's rank offset, i.e. fewer than
  // offset - i entries of `large` precede it.
  let lo = Math.max(0, offset - large.size);
  let hi = Math.min(offset, small.size);
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    const e = small.entries(mid, 1);
    if (large.rankOf(e.keys[0]!, e.ids[0]!) + mid < offset) lo = mid + 1;
    else hi = mid;
  }
  const a = large.entries(offset - lo, limit);
  const b = small.entries(lo, limit);
  const ids: number[] = [];
  const keys: number[] = [];
  let i = 0;
  let j = 0;
  while (ids.length < limit && (i < a.ids.length || j < b.ids.length)) {
    const takeA = j >= b.ids.length || (i < a.ids.length && large.before(a.keys[i]!, a.ids[i]!, b.keys[j]!, b.ids[j]!));
    if (takeA) {
      ids.push(a.ids[i]!);
      keys.push(a.keys[i++]!);
    } else {
      ids.push(b.ids[j]!);
      keys.push(b.keys[j++]!);
    }
  }
  return { ids, keys };
}
