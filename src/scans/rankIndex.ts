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
 * tiebreak following the last term's direction); `ascending` reverses both. Keys are numbers
 * (typed arrays) or strings (compared by UTF-16 code unit, which is SQLite's BINARY order for the
 * ASCII external keys).
 */
type Key = number | string;
type Keys = Float64Array | string[];

class Block {
  keys: Keys;
  ids: Float64Array;
  length = 0;

  constructor(
    capacity: number,
    private readonly strings: boolean,
  ) {
    this.keys = strings ? new Array<string>(capacity).fill('') : new Float64Array(capacity);
    this.ids = new Float64Array(capacity);
  }

  /** Doubles the arrays (a block starts small: most indexes, one per location, hold a handful of entries). */
  grow(max: number): void {
    const grown = new Block(Math.min(max, this.keys.length * 2), this.strings);
    grown.take(this, 0, this.length);
    this.keys = grown.keys;
    this.ids = grown.ids;
  }

  /** Copies entries from..to-1 of `source` to the start of this block. */
  take(source: Block, from: number, to: number): void {
    if (this.keys instanceof Float64Array) this.keys.set((source.keys as Float64Array).subarray(from, to));
    else for (let i = from; i < to; i++) this.keys[i - from] = source.keys[i] as string;
    this.ids.set(source.ids.subarray(from, to));
    this.length = to - from;
  }
}

const FIRST_BLOCK_CAPACITY = 8;
/**
 * The pairs from..to-1 of (keys, ids), sorted in the index's order, from one numeric sort of
 * (key - min key) * id span + (id - min id), each pair read back from its packed value: no table
 * spanning the ids, so it also serves a location's few pairs spread over 1,000,000 asset ids. A scan
 * batch's comparator sorts (95,000 pairs twice for the organization's order, about 475 twice for
 * each of 200 locations') were a third of the report index's time per batch at 1,000,000 assets.
 * Undefined (the caller sorts with the comparator) when a key or id is not an integer or the packed
 * values would pass 2^53.
 */
function packedPairs(
  keys: ArrayLike<number>,
  ids: ArrayLike<number>,
  from: number,
  to: number,
  ascending: boolean,
): { keys: Float64Array; ids: Float64Array } | undefined {
  const n = to - from;
  let kMin = Number.POSITIVE_INFINITY;
  let kMax = Number.NEGATIVE_INFINITY;
  let iMin = Number.POSITIVE_INFINITY;
  let iMax = Number.NEGATIVE_INFINITY;
  for (let p = from; p < to; p++) {
    const k = keys[p]!;
    const i = ids[p]!;
    if (!Number.isSafeInteger(k) || !Number.isSafeInteger(i)) return undefined;
    if (k < kMin) kMin = k;
    if (k > kMax) kMax = k;
    if (i < iMin) iMin = i;
    if (i > iMax) iMax = i;
  }
  const span = iMax - iMin + 1;
  if ((kMax - kMin + 1) * span > Number.MAX_SAFE_INTEGER) return undefined;
  const packed = new Float64Array(n);
  for (let p = 0; p < n; p++) packed[p] = (keys[from + p]! - kMin) * span + (ids[from + p]! - iMin);
  packed.sort();
  const sortedKeys = new Float64Array(n);
  const sortedIds = new Float64Array(n);
  for (let j = 0; j < n; j++) {
    const v = packed[ascending ? j : n - 1 - j]!;
    const slot = v % span;
    sortedIds[j] = iMin + slot;
    sortedKeys[j] = kMin + (v - slot) / span;
  }
  return { keys: sortedKeys, ids: sortedIds };
}

/** 0, 1, 2, ...: the order of pairs already sorted (grown on demand, never shrunk). */
let identityScratch = new Uint32Array(0);
function identity(n: number): Uint32Array {
  if (identityScratch.length < n) {
    identityScratch = new Uint32Array(Math.max(n, identityScratch.length * 2));
    for (let i = 0; i < identityScratch.length; i++) identityScratch[i] = i;
  }
  return identityScratch.subarray(0, n);
}

/** Whether (ka, ia) comes before (kb, ib): descending by key then id, or ascending. */
function numberBefore(ka: number, ia: number, kb: number, ib: number, ascending: boolean): boolean {
  return ascending ? ka < kb || (ka === kb && ia < ib) : ka > kb || (ka === kb && ia > ib);
}

/** RankIndex.positionIn for number keys, without the generic comparison's type test (a batch runs it about 200,000 times). */
function numberPosition(
  keys: Float64Array,
  ids: Float64Array,
  length: number,
  key: number,
  id: number,
  from: number,
  ascending: boolean,
): number {
  let lo = from;
  let hi = length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (numberBefore(keys[mid]!, ids[mid]!, key, id, ascending)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** rekeyMany's merge buffers: a block and the pairs it takes (grown once for a block size above 1,024). */
let keysScratch = new Float64Array(1024);
let idsScratch = new Float64Array(1024);
const scratchKeys = (n: number) => (n <= keysScratch.length ? keysScratch : (keysScratch = new Float64Array(n)));
const scratchIds = (n: number) => (n <= idsScratch.length ? idsScratch : (idsScratch = new Float64Array(n)));

/** Below this many pairs, removeMany and insertMany go one pair at a time (a block pass costs more). */
const BULK_FROM = 64;
/** rekeyMany's working arrays: its one-pass path takes fewer than BULK_FROM pairs, so no allocation per call. */
const positionsScratch = new Int32Array(BULK_FROM);
const orderScratch = new Int32Array(BULK_FROM);

export class RankIndex<K extends Key = number> {
  private readonly blocks: Block[];
  private total = 0;

  /** `blockSize` is for tests, which use tiny blocks so that every sequence splits and empties some. */
  constructor(
    private readonly ascending = false,
    private readonly blockSize = 1024,
    private readonly strings = false,
  ) {
    this.blocks = [new Block(Math.min(FIRST_BLOCK_CAPACITY, blockSize), strings)];
  }

  get size(): number {
    return this.total;
  }

  /** Whether (ka, ia) comes before (kb, ib) in this index's order. */
  before(ka: K, ia: number, kb: K, ib: number): boolean {
    return this.compare(ka, ia, kb, ib) < 0;
  }

  /** Negative when (ka, ia) comes before (kb, ib) in this index's order. */
  private compare(ka: K, ia: number, kb: K, ib: number): number {
    const c = ka !== kb ? (typeof ka === 'number' ? (kb as number) - ka : ka < kb ? 1 : -1) : ib - ia;
    return this.ascending ? -c : c;
  }

  /** The block that holds, or would hold, (key, id): the last block whose first entry is not after it. */
  private blockFor(key: K, id: number): number {
    let lo = 0;
    let hi = this.blocks.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      const b = this.blocks[mid]!;
      if (this.compare(b.keys[0] as K, b.ids[0]!, key, id) <= 0) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /** The position of the first entry of `b` not before (key, id). */
  private positionIn(b: Block, key: K, id: number, from = 0): number {
    if (!this.strings) return numberPosition(b.keys as Float64Array, b.ids, b.length, key as number, id, from, this.ascending);
    let lo = from;
    let hi = b.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.compare(b.keys[mid] as K, b.ids[mid]!, key, id) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  insert(key: K, id: number): void {
    const bi = this.blockFor(key, id);
    const b = this.blocks[bi]!;
    const at = this.positionIn(b, key, id);
    if (at < b.length && b.keys[at] === key && b.ids[at] === id) return;
    if (b.length === b.keys.length) b.grow(this.blockSize);
    b.keys.copyWithin(at + 1, at, b.length);
    b.ids.copyWithin(at + 1, at, b.length);
    b.keys[at] = key as never;
    b.ids[at] = id;
    b.length++;
    this.total++;
    if (b.length === this.blockSize) this.split(bi);
  }

  /** Removes (key, id); false when it was not there. */
  remove(key: K, id: number): boolean {
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

  /**
   * Removes many pairs in one pass over the blocks they fall in (each block compacted once, not once
   * per pair): a scan batch's re-reads move tens of thousands of entries, and one remove shifts half
   * a block. Returns, per pair, whether it was there. Pairs must be distinct.
   */
  removeMany(keys: ArrayLike<K>, ids: ArrayLike<number>): boolean[] {
    const found = new Array<boolean>(ids.length).fill(false);
    if (ids.length < BULK_FROM) {
      for (let i = 0; i < ids.length; i++) found[i] = this.remove(keys[i]!, ids[i]!);
      return found;
    }
    const sorted = this.strings ? undefined : packedPairs(keys as ArrayLike<number>, ids, 0, ids.length, this.ascending);
    if (sorted === undefined) {
      this.removeOrdered(keys, ids, this.sortedOrder(keys, ids), found);
      return found;
    }
    const removed = new Array<boolean>(ids.length).fill(false);
    this.removeOrdered(sorted.keys as unknown as ArrayLike<K>, sorted.ids, identity(ids.length), removed);
    // Back to the callers' order: the pairs not there are few (a batch's moves of deleted assets).
    const missing = new Set<string>();
    for (let j = 0; j < removed.length; j++) if (!removed[j]) missing.add(`${sorted.keys[j]}:${sorted.ids[j]}`);
    for (let p = 0; p < ids.length; p++) found[p] = missing.size === 0 || !missing.has(`${keys[p]}:${ids[p]}`);
    return found;
  }

  /** removeMany's pass over the blocks, the pairs taken in `order` (this index's order); `found[p]` set for each pair p that was there. */
  private removeOrdered(keys: ArrayLike<K>, ids: ArrayLike<number>, order: ArrayLike<number>, found: boolean[]): void {
    let emptied = false;
    for (let j = 0; j < order.length; ) {
      const bi = this.blockFor(keys[order[j]!]!, ids[order[j]!]!);
      const b = this.blocks[bi]!;
      const next = this.blocks[bi + 1];
      // Found pairs are cut out of the block; the runs between them shift down once each.
      let kept = 0;
      let read = 0;
      for (; j < order.length; j++) {
        const p = order[j]!;
        if (next !== undefined && this.compare(keys[p]!, ids[p]!, next.keys[0] as K, next.ids[0]!) >= 0) break;
        const at = this.positionIn(b, keys[p]!, ids[p]!, read);
        if (at >= b.length || b.keys[at] !== keys[p] || b.ids[at] !== ids[p]) continue;
        found[p] = true;
        if (kept !== read) {
          // Element by element: the runs between a batch's pairs are short, and a copyWithin call per run cost more.
          const keys = b.keys;
          const ids = b.ids;
          for (let from = read, to = kept; from < at; from++, to++) {
            keys[to] = keys[from] as never;
            ids[to] = ids[from]!;
          }
        }
        kept += at - read;
        read = at + 1;
      }
      if (kept !== read) {
        b.keys.copyWithin(kept, read, b.length);
        b.ids.copyWithin(kept, read, b.length);
      }
      kept += b.length - read;
      this.total -= b.length - kept;
      b.length = kept;
      if (kept === 0) emptied = true;
    }
    if (emptied) {
      const left = this.blocks.filter((b) => b.length > 0);
      this.blocks.length = 0;
      this.blocks.push(...(left.length > 0 ? left : [new Block(Math.min(FIRST_BLOCK_CAPACITY, this.blockSize), this.strings)]));
    }
  }

  /**
   * Inserts many pairs, each block merged with the pairs that fall in it once (a scan batch's
   * re-reads all land near the newest end, in one block, which one insert at a time shifts whole
   * each time). Pairs already present are kept once.
   */
  insertMany(keys: ArrayLike<K>, ids: ArrayLike<number>): void {
    if (ids.length < BULK_FROM) {
      for (let i = 0; i < ids.length; i++) this.insert(keys[i]!, ids[i]!);
      return;
    }
    const sorted = this.strings ? undefined : packedPairs(keys as ArrayLike<number>, ids, 0, ids.length, this.ascending);
    if (sorted !== undefined) this.insertOrdered(sorted.keys as unknown as ArrayLike<K>, sorted.ids, identity(ids.length));
    else this.insertOrdered(keys, ids, this.sortedOrder(keys, ids));
  }

  /** insertMany's merge, the pairs taken in `order` (this index's order). */
  private insertOrdered(keys: ArrayLike<K>, ids: ArrayLike<number>, order: ArrayLike<number>): void {
    const blocks: Block[] = [];
    let j = 0;
    for (let bi = 0; bi < this.blocks.length; bi++) {
      const b = this.blocks[bi]!;
      const next = this.blocks[bi + 1];
      const start = j;
      while (j < order.length) {
        const p = order[j]!;
        if (next !== undefined && this.compare(keys[p]!, ids[p]!, next.keys[0] as K, next.ids[0]!) >= 0) break;
        j++;
      }
      if (j === start) {
        blocks.push(b);
        continue;
      }
      // Merge the block's entries with its pairs into blocks of at most half the block size.
      const half = Math.max(1, this.blockSize >> 1);
      let out = new Block(Math.min(this.blockSize, Math.max(FIRST_BLOCK_CAPACITY, b.length + j - start)), this.strings);
      const emit = (key: K, id: number) => {
        if (out.length > 0 && out.keys[out.length - 1] === key && out.ids[out.length - 1] === id) return;
        if (out.length === half && this.blockSize > 1) {
          blocks.push(out);
          out = new Block(this.blockSize, this.strings);
        } else if (out.length === out.keys.length) out.grow(this.blockSize);
        out.keys[out.length] = key as never;
        out.ids[out.length++] = id;
      };
      let i = 0;
      for (let q = start; q < j; q++) {
        const p = order[q]!;
        while (i < b.length && this.compare(b.keys[i] as K, b.ids[i]!, keys[p]!, ids[p]!) <= 0) emit(b.keys[i] as K, b.ids[i++]!);
        emit(keys[p]!, ids[p]!);
      }
      while (i < b.length) emit(b.keys[i] as K, b.ids[i++]!);
      blocks.push(out);
    }
    this.blocks.length = 0;
    this.blocks.push(...blocks);
    this.total = blocks.reduce((n, b) => n + b.length, 0);
  }

  /**
   * Gives the pairs (before[i], ids[i]) the keys after[i]: removeMany(before, ids) then
   * insertMany(after, ids), in one pass over the block when the index is one block with room for
   * them (a location's order: about 100 entries and 10 of a batch's re-reads each, where a remove
   * and an insert each shifted the block). Pairs not there are inserted all the same. Ids distinct.
   * The pairs are from..to-1 of the three columns; number keys only.
   */
  rekeyMany(before: Float64Array, after: Float64Array, ids: Float64Array, from = 0, to = ids.length): void {
    const n = to - from;
    const b = this.blocks[0]!;
    if (this.blocks.length !== 1 || this.strings || n >= BULK_FROM || b.length + n >= this.blockSize) {
      const pairIds = ids.subarray(from, to);
      this.removeMany(before.subarray(from, to) as unknown as ArrayLike<K>, pairIds);
      this.insertMany(after.subarray(from, to) as unknown as ArrayLike<K>, pairIds);
      return;
    }
    // Where the old pairs are, found before the block changes (then in ascending order, insertion sort: n < BULK_FROM).
    const gone = positionsScratch;
    let removed = 0;
    for (let i = from; i < to; i++) {
      const at = this.positionIn(b, before[i] as K, ids[i]!);
      if (at >= b.length || b.keys[at] !== before[i] || b.ids[at] !== ids[i]) continue;
      let j = removed++;
      while (j > 0 && gone[j - 1]! > at) {
        gone[j] = gone[j - 1]!;
        j--;
      }
      gone[j] = at;
    }
    // The new pairs in this index's order (insertion sort: n < BULK_FROM).
    const order = orderScratch;
    for (let i = from; i < to; i++) {
      let j = i - from;
      while (j > 0 && numberBefore(after[i]!, ids[i]!, after[order[j - 1]!]!, ids[order[j - 1]!]!, this.ascending)) {
        order[j] = order[j - 1]!;
        j--;
      }
      order[j] = i;
    }
    // One pass: the block without the old pairs, merged with the new ones (a pair already there kept
    // once, as insert does), into scratch arrays copied back at once (a copyWithin per run cost more).
    const keys = b.keys as Float64Array;
    const outKeys = scratchKeys(b.length + n);
    const outIds = scratchIds(b.length + n);
    let written = 0;
    let next = 0;
    for (let i = 0, g = 0; i < b.length; i++) {
      if (g < removed && gone[g] === i) {
        g++;
        continue;
      }
      const key = keys[i]!;
      const id = b.ids[i]!;
      while (next < n) {
        const p = order[next]!;
        const newKey = after[p]!;
        if (!numberBefore(newKey, ids[p]!, key, id, this.ascending)) {
          if (newKey === key && ids[p] === id) next++;
          break;
        }
        outKeys[written] = newKey;
        outIds[written++] = ids[p]!;
        next++;
      }
      outKeys[written] = key;
      outIds[written++] = id;
    }
    for (; next < n; next++) {
      outKeys[written] = after[order[next]!]!;
      outIds[written++] = ids[order[next]!]!;
    }
    while (b.keys.length < written) b.grow(this.blockSize);
    (b.keys as Float64Array).set(outKeys.subarray(0, written));
    b.ids.set(outIds.subarray(0, written));
    this.total += written - b.length;
    b.length = written;
  }

  /** Indexes of the pairs, in this index's order, by comparator: string keys, or number keys packedPairs cannot pack. */
  private sortedOrder(keys: ArrayLike<K>, ids: ArrayLike<number>): Uint32Array {
    const order = new Uint32Array(ids.length);
    for (let i = 0; i < order.length; i++) order[i] = i;
    if (this.strings) return order.sort((a, b) => this.compare(keys[a]!, ids[a]!, keys[b]!, ids[b]!));
    // Number keys: a comparator without the generic one's type test (the sort is most of a bulk call).
    const k = Float64Array.from(keys as ArrayLike<number>);
    const i = Float64Array.from(ids);
    const sign = this.ascending ? -1 : 1;
    return order.sort((a, b) => sign * (k[b]! - k[a]! || i[b]! - i[a]!));
  }

  /** The ids at ranks offset..offset+limit-1 (fewer at the end). */
  page(offset: number, limit: number): number[] {
    return this.entries(offset, limit).ids;
  }

  /** The entries at ranks offset..offset+limit-1 (fewer at the end), ids and keys side by side. */
  entries(offset: number, limit: number): { ids: number[]; keys: K[] } {
    const ids: number[] = [];
    const keys: K[] = [];
    let bi = 0;
    let skip = offset;
    while (bi < this.blocks.length && skip >= this.blocks[bi]!.length) skip -= this.blocks[bi++]!.length;
    for (; bi < this.blocks.length && ids.length < limit; bi++, skip = 0) {
      const b = this.blocks[bi]!;
      for (let i = skip; i < b.length && ids.length < limit; i++) {
        ids.push(b.ids[i]!);
        keys.push(b.keys[i] as K);
      }
    }
    return { ids, keys };
  }

  /** How many entries come before (key, id) in this index's order. */
  rankOf(key: K, id: number): number {
    const bi = this.blockFor(key, id);
    let rank = 0;
    for (let i = 0; i < bi; i++) rank += this.blocks[i]!.length;
    return rank + this.positionIn(this.blocks[bi]!, key, id);
  }

  /** Bytes held by the arrays (for string keys: a slot and the characters of each, as one-byte strings). */
  bytes(): number {
    let bytes = 0;
    for (const b of this.blocks) {
      bytes += b.ids.byteLength;
      if (b.keys instanceof Float64Array) bytes += b.keys.byteLength;
      else for (let i = 0; i < b.keys.length; i++) bytes += 8 + (i < b.length ? 16 + b.keys[i]!.length : 0);
    }
    return bytes;
  }

  private split(bi: number): void {
    const b = this.blocks[bi]!;
    const half = b.length >> 1;
    const right = new Block(this.blockSize, this.strings);
    right.take(b, half, b.length);
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
