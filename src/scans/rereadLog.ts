import type { Shard } from '../shards/shard.js';
import { shardState } from '../shards/state.js';
import type { ShardWriter } from '../shards/writer.js';
import type { Db } from '../storage/sqlite.js';
import { RereadTable } from './rereadTable.js';

/**
 * The re-read log (migrations 017 and 019, docs/field-rereads.md): a re-read that only extends its
 * open visit is logged instead of rewriting its scan_positions row (a batch's entries are one row
 * of scan_reread_blocks), and each scan batch folds
 * one slice of scan_positions. Whoever reads an open visit's last_seen_at or read count lays the
 * latest log entry of the asset over its scan_positions row (RereadOverlay): the writer from memory
 * (it appended every entry), each reading thread from the entries it has read so far (it reads the
 * new ones, in seq order, inside the read transaction of the request), an export from the log as
 * its own snapshot holds it.
 */

/** The latest logged re-read of an asset. */
export interface Reread {
  seq: number;
  visitId: number;
  lastSeenAt: number;
  readCount: number;
}

/**
 * Most positions one scan batch folds (the next ones in asset-id order after the fold's cursor). A
 * batch folds FOLD_PER_POSITION positions per position it touched, at least MIN_FOLD_SLICE, at most
 * this: the fold's work follows the batch's size (a small batch does not pay for a big slice), and a
 * fold cycle spans about positions / 4 re-read assets, which bounds the log's rows (two cycles) at
 * about half the positions.
 */
export const DEFAULT_FOLD_SLICE = 262_144;
const FOLD_PER_POSITION = 4;
const MIN_FOLD_SLICE = 1024;
/** Tables whose asset ids span at most the largest fold slice over this write their re-reads directly (RereadLog.logsRereads). */
const SMALL_TABLE_DIVISOR = 4;

/** The positions a batch that touched `positions` positions folds, with `most` the cap (ApplyOptions.foldSlice). */
export function foldSliceOf(positions: number, most = DEFAULT_FOLD_SLICE): number {
  return Math.max(1, Math.min(most, Math.max(MIN_FOLD_SLICE, positions * FOLD_PER_POSITION)));
}

/** The SQL function that gives a position's last_seen_at with the log laid over it: reread_seen(asset_id, visit_id, visit_read_count, last_seen_at). */
export const SEEN_FUNCTION = 'reread_seen';

/** Bytes of one entry in a block: asset id, visit id, last_seen_at, read count, each a little-endian float64 (migration 019). */
const ENTRY_BYTES = 32;

const BLOCKS = 'SELECT last_seq, entries FROM scan_reread_blocks';

/** Numbers per entry in RereadBatch.entries (a block's layout: asset, visit, last_seen_at, read count). */
const ENTRY_FIELDS = ENTRY_BYTES / 8;

const LITTLE_ENDIAN = new Uint8Array(new Float64Array([1]).buffer)[7] === 0x3f;

/** A batch's entries as a block's blob: the entries' own bytes on a little-endian host. */
function blockOf(entries: Float64Array, count: number): Buffer {
  if (LITTLE_ENDIAN) return Buffer.from(entries.buffer, entries.byteOffset, count * ENTRY_BYTES);
  const out = Buffer.allocUnsafe(count * ENTRY_BYTES);
  const view = new DataView(out.buffer, out.byteOffset, out.length);
  for (let i = 0; i < count * ENTRY_FIELDS; i++) view.setFloat64(i * 8, entries[i]!, true);
  return out;
}

/**
 * The latest logged re-read per asset, laid over scan_positions rows: it counts only when it names
 * the row's visit and has the greater read count (both only grow within a visit; a move or a new
 * visit writes scan_positions itself, so a log row of another visit is older than the row).
 */
export class RereadOverlay {
  /**
   * The entries in typed arrays (rereadTable.ts), for every holder: the writer's up to a cycle of
   * entries (about 500,000 at 1,000,000 assets) as a `Map` of small objects, each with a boxed
   * double, were objects that every full collection of the shard thread's heap marked.
   */
  protected readonly table = new RereadTable();

  /** The re-read that is newer than a scan_positions row (asset, visit, read count), if any. */
  over(assetId: number, visitId: number, readCount: number): Reread | undefined {
    const slot = this.newerSlot(assetId, visitId, readCount);
    if (slot < 0) return undefined;
    return { seq: this.table.seqAt(slot), visitId, lastSeenAt: this.table.lastSeenAt(slot), readCount: this.table.readCountAt(slot) };
  }

  /** Assets whose latest logged re-read this overlay holds. */
  heldAssets(): number {
    return this.table.size;
  }

  /** As over(), without an object per row: SQLite calls it for every row its report sorts (reread_seen). */
  lastSeen(assetId: number, visitId: number, readCount: number, lastSeenAt: number): number {
    const slot = this.newerSlot(assetId, visitId, readCount);
    return slot < 0 ? lastSeenAt : this.table.lastSeenAt(slot);
  }

  /** The slot of the asset's entry when it is newer than a scan_positions row (the rule of over()), else -1. */
  private newerSlot(assetId: number, visitId: number, readCount: number): number {
    const slot = this.table.find(assetId);
    return slot >= 0 && this.table.visitAt(slot) === visitId && this.table.readCountAt(slot) > readCount ? slot : -1;
  }

  /**
   * Takes the entries after seq `after` of log blocks in seq order (raw rows: last_seq, entries),
   * at most `most`; returns the last seq taken (`after` when none) and how many were taken.
   */
  protected take(blocks: Iterable<unknown>, after: number, most = Number.POSITIVE_INFINITY): [number, number] {
    let last = after;
    let taken = 0;
    for (const [lastSeq, entries] of blocks as Iterable<[number, Buffer]>) {
      const n = entries.length / ENTRY_BYTES;
      const first = lastSeq - n + 1;
      const view = new DataView(entries.buffer, entries.byteOffset, entries.length);
      for (let k = Math.max(0, last + 1 - first); k < n && taken < most; k++, taken++) {
        const at = k * ENTRY_BYTES;
        const assetId = view.getFloat64(at, true);
        this.table.set(assetId, first + k, view.getFloat64(at + 8, true), view.getFloat64(at + 16, true), view.getFloat64(at + 24, true));
        last = first + k;
      }
      if (taken >= most) break;
    }
    return [last, taken];
  }

  /** Registers reread_seen on a connection, answering from this overlay (the SQL report path's sort). */
  registerOn(db: Db): void {
    db.function(SEEN_FUNCTION, { deterministic: false, varargs: false }, (assetId, visitId, readCount, lastSeenAt) =>
      this.lastSeen(assetId as number, visitId as number, readCount as number, lastSeenAt as number),
    );
  }
}

/** Lays a row's figures over: the row with its last_seen_at (and read count) replaced by the log's when newer. */
export function laidOver<R extends { asset_id: number; visit_id: number; visit_read_count: number; last_seen_at: number }>(
  overlay: RereadOverlay,
  row: R,
): R {
  const r = overlay.over(row.asset_id, row.visit_id, row.visit_read_count);
  if (r === undefined) return row;
  row.last_seen_at = r.lastSeenAt;
  row.visit_read_count = r.readCount;
  return row;
}

/** The log as one connection's snapshot holds it (an export's): to be called inside its read transaction. */
export function overlayOf(db: Db): RereadOverlay {
  const overlay = new SnapshotOverlay();
  overlay.load(db);
  return overlay;
}

class SnapshotOverlay extends RereadOverlay {
  load(db: Db): void {
    this.take(db.prepare(`${BLOCKS} ORDER BY last_seq`).raw().iterate(), 0);
  }
}

/**
 * A reading thread's overlay of one shard: the log rows it has read, minus those the fold has
 * since written into scan_positions and deleted (seq at or below folded_through). Requests on a
 * thread take snapshots in time order, so the rows read so far are all at or before the current one.
 */
class ReaderOverlay extends RereadOverlay {
  private through = 0;
  /** The fold's folded_through last seen: entries at or below it are dropped (pruneSome), a slice per turn. */
  private pruneThrough = 0;
  /** The next slot of the table to sweep for them; -1: none to sweep. */
  private pruneFrom = -1;
  private following: NodeJS.Timeout | undefined;

  constructor(private readonly shard: Shard) {
    super();
    this.registerOn(shard.reader);
  }

  /** Reads the log rows appended since the last call; inside the read transaction of the queries it is laid over. */
  catchUp(): this {
    this.readNew(Number.POSITIVE_INFINITY);
    return this;
  }

  /**
   * Keeps reading the log between requests, a slice at a time, so that a request reads only what
   * was appended since the last tick: at 1,000,000 assets a thread that had served no report while
   * a burst of 500,000 re-reads was applied read them all in its next request, which took 1.1 s,
   * and every request of the thread waited behind it. Stops once the shard's reader is closed.
   */
  follow(): void {
    if (this.following !== undefined) return;
    let slicing = false;
    const tick = (fromSlice: boolean) => {
      if (slicing && !fromSlice) return;
      slicing = false;
      const reader = this.shard.reader;
      if (!reader.open) {
        clearInterval(this.following);
        return;
      }
      // A request that holds a read transaction across an await keeps its snapshot: not read past it.
      if (reader.inTransaction) return;
      let more: boolean;
      try {
        more = reader.transaction(() => this.readNew(FOLLOW_SLICE))();
      } catch {
        // An unreadable file (an I/O error): the next request that reads the log meets it and answers for it.
        return;
      }
      if (this.pruneSome(PRUNE_SLICE) || more) {
        slicing = true;
        setImmediate(() => tick(true));
      }
    };
    this.following = setInterval(() => tick(false), FOLLOW_MS).unref();
  }

  /** Reads at most `most` of the rows appended since the last read; whether more may remain. */
  private readNew(most: number): boolean {
    const statements = this.shard.readerStatements;
    const folded = statements.get('SELECT folded_through FROM scan_reread_fold WHERE id = 1').pluck().get() as number;
    if (folded > this.pruneThrough) {
      this.pruneThrough = folded;
      this.pruneFrom = 0;
    }
    const from = Math.max(this.through, folded);
    // A block read in part (a slice's end) is read again from its start next time, its entries up to `through` skipped.
    const [last, taken] = this.take(statements.get(`${BLOCKS} WHERE last_seq > ? ORDER BY last_seq`).raw().iterate(from), from, most);
    this.through = last;
    return taken === most;
  }

  /**
   * Drops, among the next `most` slots of the table, the entries the fold has written into
   * scan_positions (seq at or below its folded_through); whether slots remain to sweep. Only
   * memory: such an entry is never laid over, since its position row has at least its read count.
   * Before, the one request that first saw a new folded_through made a whole pass over the
   * entries (up to about half the positions) at each cycle's end.
   */
  private pruneSome(most: number): boolean {
    if (this.pruneFrom < 0) return false;
    this.pruneFrom = this.table.prune(this.pruneFrom, most, this.pruneThrough);
    return this.pruneFrom >= 0;
  }
}

/** How often a reading thread reads the log's new rows between requests, and at most how many in one turn (about 30 ms of its CPU). */
const FOLLOW_MS = 50;
const FOLLOW_SLICE = 20_000;
const PRUNE_SLICE = 100_000;

/** This thread's overlay of the shard (call catchUp() inside the request's read transaction); it follows the log between requests. */
export const readerOverlayOf = shardState((shard: Shard) => {
  const overlay = new ReaderOverlay(shard);
  overlay.follow();
  return overlay;
});

/**
 * Reads the shard's whole log into this thread's overlay now (an HTTP thread before it reports
 * ready), so that its first report or history request does not: at 1,000,000 assets the log held
 * 585,000 rows and a thread's first history request took 1.36 s, every request of the thread
 * waiting behind it (bench/results/large.json). Returns the assets the overlay holds.
 */
export function warmReaderOverlay(shard: Shard): number {
  return shard.reader.transaction(() => readerOverlayOf(shard).catchUp().heldAssets())();
}

/** What a scan batch did to the log, applied to the writer's overlay once it committed. */
export interface RereadBatch {
  /**
   * The batch's entries in seq order, ENTRY_FIELDS numbers each, and how many: columns instead of
   * two small objects per re-read (95,000 of a 100,000-read batch in the field).
   */
  entries: Float64Array;
  count: number;
  /** Assets whose entry the batch's fold wrote into scan_positions. */
  folded: number[];
  /** The asset ids the fold's slice covered: after `from`, through `to` (Infinity: to the end of the table). */
  slice?: { from: number; to: number };
  /** Assets whose scan_positions row the batch wrote itself (a move, a new visit): their entry is older. */
  written: number[];
}

/** Consecutive asset ids per bucket of the unfolded entries' ids (RereadLog.file); tests set a few (TRACKD_TEST_FOLD_BUCKET) so that their assets span many. */
const BUCKET = Number(process.env.TRACKD_TEST_FOLD_BUCKET) || 256;
const bucketOf = (assetId: number) => Math.floor(assetId / BUCKET);

/**
 * The writer's side: appends a batch's re-reads, folds a slice per batch, and keeps the latest
 * entry of every asset not yet folded (loaded from the log at start: rows already folded but not
 * yet deleted then come back, and fold as no-ops, since the fold writes only greater read counts).
 */
export class RereadLog extends RereadOverlay {
  private nextSeq: number;
  private readonly s;
  /** The entries' columns, kept from batch to batch (one batch at a time is open on the writer); one entry at first, so that tests' batches grow it. */
  private scratch = new Float64Array(ENTRY_FIELDS);

  constructor(db: Db) {
    super();
    const p = (sql: string) => db.prepare(sql);
    this.s = {
      append: p('INSERT INTO scan_reread_blocks (last_seq, entries) VALUES (?, ?)'),
      state: p('SELECT cursor, cycle_seq, folded_through FROM scan_reread_fold WHERE id = 1'),
      // The slice's size and last asset id, counted by SQLite in one step (a walk of the rows from JS cost a tenth of a batch at 1,000,000 positions).
      slice: p(
        'SELECT count(*) AS n, max(asset_id) AS last FROM (SELECT asset_id FROM scan_positions WHERE asset_id > ? ORDER BY asset_id LIMIT ?)',
      ),
      fold: p(
        'UPDATE scan_positions SET last_seen_at = ?, visit_read_count = ? WHERE asset_id = ? AND visit_id = ? AND visit_read_count < ?',
      ),
      // Whole blocks: cycle_seq is always a block's last seq (a cycle begins at the last seq appended so far).
      deleteThrough: p('DELETE FROM scan_reread_blocks WHERE last_seq <= ?'),
      empty: p('SELECT NOT EXISTS (SELECT 1 FROM scan_reread_blocks)').pluck(),
      span: p('SELECT (SELECT max(asset_id) FROM scan_positions) - (SELECT min(asset_id) FROM scan_positions) + 1').pluck(),
      saveState: p('UPDATE scan_reread_fold SET cursor = ?, cycle_seq = ?, folded_through = ? WHERE id = 1'),
    };
    const { folded_through } = this.s.state.get() as FoldState;
    const [last] = this.take(p(`${BLOCKS} ORDER BY last_seq`).raw().iterate(), 0);
    this.table.forEachId((assetId) => this.file(assetId));
    this.nextSeq = Math.max(last, folded_through) + 1;
    this.registerOn(db);
  }

  /** Entries not yet folded (for start-up logs and the README's figures). */
  get size(): number {
    return this.table.size;
  }

  begin(): RereadBatch {
    return { entries: this.scratch, count: 0, folded: [], written: [] };
  }

  /**
   * Inside a batch's transaction, before its own writes: writes the entries of the next `slice`
   * positions after the cursor into scan_positions; at the end of scan_positions, deletes the log
   * rows of the cycle before and starts a new one. With the log empty (a small shard writes its
   * re-reads directly) nothing moves: there is no entry to write nor row to delete, and every row
   * deleted before is at or below folded_through already.
   */
  fold(batch: RereadBatch, slice: number): void {
    if (this.s.empty.get() === 1) return;
    const state = this.s.state.get() as FoldState;
    const { n, last } = this.s.slice.get(state.cursor, slice) as { n: number; last: number | null };
    // The slice's positions are the next `slice` after the cursor, in asset-id order (consecutive rows share pages).
    const whole = n === slice;
    const to = whole ? last! : Number.POSITIVE_INFINITY;
    batch.slice = { from: state.cursor, to };
    for (const assetId of this.filedIn(state.cursor, to)) {
      const slot = this.table.find(assetId);
      if (slot < 0) continue;
      batch.folded.push(assetId);
      const readCount = this.table.readCountAt(slot);
      this.s.fold.run(this.table.lastSeenAt(slot), readCount, assetId, this.table.visitAt(slot), readCount);
    }
    if (whole) this.s.saveState.run(last, state.cycle_seq, state.folded_through);
    else {
      this.s.deleteThrough.run(state.cycle_seq);
      this.s.saveState.run(0, this.nextSeq - 1, state.cycle_seq);
    }
  }

  /**
   * Whether the batch's re-reads go to the log (else each writes its scan_positions row): only on
   * a table whose asset ids span more than `most` / SMALL_TABLE_DIVISOR (65,536 with the default
   * fold slice). The log saves page writes where a batch's re-reads are spread over more pages
   * than the writer's cache keeps warm (1,000,000 positions); on a small table every page stays
   * warm, and a logged re-read costs its insert, its fold and its row's delete more than the
   * update it stands for. The span (max - min asset id, two seeks) bounds the row count and is a
   * function of the committed rows, so a replay decides the same.
   */
  logsRereads(most = DEFAULT_FOLD_SLICE): boolean {
    const span = this.s.span.get() as number | null;
    return span !== null && span > Math.floor(most / SMALL_TABLE_DIVISOR);
  }

  /** Inside the batch's transaction, after fold(): logs a re-read (calls in asset-id order, so seqs are a function of the batch); written by flush(). */
  append(batch: RereadBatch, assetId: number, visitId: number, lastSeenAt: number, readCount: number): void {
    if ((batch.count + 1) * ENTRY_FIELDS > batch.entries.length) {
      const grown = new Float64Array(batch.entries.length * 2);
      grown.set(batch.entries);
      batch.entries = this.scratch = grown;
    }
    const e = batch.entries;
    const at = batch.count++ * ENTRY_FIELDS;
    e[at] = assetId;
    e[at + 1] = visitId;
    e[at + 2] = lastSeenAt;
    e[at + 3] = readCount;
  }

  /**
   * Inside the batch's transaction, after its last append(): writes its entries as one block. A
   * row per entry cost about a tenth of a 100,000-read batch at 1,000,000 assets (docs/field-rereads.md).
   */
  flush(batch: RereadBatch): void {
    if (batch.count > 0) this.s.append.run(this.nextSeq + batch.count - 1, blockOf(batch.entries, batch.count));
  }

  /** After the batch committed (never after a rollback: then nothing of it happened). */
  committed(batch: RereadBatch): void {
    for (const assetId of batch.folded) this.table.delete(assetId);
    for (const assetId of batch.written) this.table.delete(assetId);
    if (batch.slice !== undefined) this.unfile(batch.slice.from, batch.slice.to);
    const e = batch.entries;
    for (let k = 0; k < batch.count; k++) {
      const at = k * ENTRY_FIELDS;
      const assetId = e[at]!;
      const held = this.table.size;
      this.table.set(assetId, this.nextSeq + k, e[at + 1]!, e[at + 2]!, e[at + 3]!);
      // A new entry (the table grew) is filed for the fold.
      if (this.table.size > held) this.file(assetId);
    }
    this.nextSeq += batch.count;
  }

  /**
   * The asset ids of the entries, filed by bucket of consecutive ids, so that a fold finds those of
   * its slice without walking the slice's positions. A bucket may still hold ids whose entry is gone
   * (written by a move) or twice; the fold checks each against the table, and a fold's commit empties
   * the buckets of its slice.
   */
  private readonly buckets = new Map<number, number[]>();

  private file(assetId: number): void {
    const key = bucketOf(assetId);
    const ids = this.buckets.get(key);
    if (ids === undefined) this.buckets.set(key, [assetId]);
    else ids.push(assetId);
  }

  /** The distinct filed ids after `from` through `to`, ascending. */
  private filedIn(from: number, to: number): Float64Array {
    const out: number[] = [];
    for (const key of this.bucketsIn(from, to)) for (const id of this.buckets.get(key)!) if (id > from && id <= to) out.push(id);
    // A numeric sort of a typed array: a comparator sort of a slice's ids (about 100,000) cost several times more.
    const sorted = Float64Array.from(out).sort();
    let kept = 0;
    for (let i = 0; i < sorted.length; i++) if (i === 0 || sorted[i] !== sorted[i - 1]) sorted[kept++] = sorted[i]!;
    return sorted.subarray(0, kept);
  }

  /** Drops the filed ids after `from` through `to` (a committed fold wrote their entries). */
  private unfile(from: number, to: number): void {
    for (const key of this.bucketsIn(from, to)) {
      const left = this.buckets.get(key)!.filter((id) => id <= from || id > to);
      if (left.length === 0) this.buckets.delete(key);
      else this.buckets.set(key, left);
    }
  }

  /** The keys of the non-empty buckets that may hold ids after `from` through `to`. */
  private bucketsIn(from: number, to: number): number[] {
    const first = bucketOf(from + 1);
    const last = bucketOf(to);
    const span = last - first + 1;
    if (span <= this.buckets.size) {
      const keys: number[] = [];
      for (let key = first; key < first + span; key++) if (this.buckets.has(key)) keys.push(key);
      return keys;
    }
    return [...this.buckets.keys()].filter((key) => key >= first && key <= last);
  }
}

interface FoldState {
  cursor: number;
  cycle_seq: number;
  folded_through: number;
}

/** The shard writer's re-read log, loaded on first use (before the report index, which lays it over its rows). */
export const rereadLogOf = shardState((shard: ShardWriter) => new RereadLog(shard.writer));
