import { TAG_TYPES } from '../masterdata/fields.js';
import { shardCommand } from '../shards/commands.js';
import { unavailable } from '../errors/domain.js';
import type { Shard } from '../shards/shard.js';
import type { ShardWriter } from '../shards/writer.js';
import type { Db } from '../storage/sqlite.js';
import { describeLocation, type CanonicalScan, type LocationRef, type SourcedScan, type TagRead } from './canonical.js';
import { shardState } from '../shards/state.js';
import { scanBatchJournal } from './journalForm.js';
import { MoveColumns, reportIndexOf, type ReportIndex } from './reportIndex.js';
import { extendsEarlier, visitStep } from './visits.js';
import { eventLogOf, MovedEvents, type EventLog } from '../events/log.js';
import { foldSliceOf, laidOver, rereadLogOf, type RereadBatch, type RereadLog } from './rereadLog.js';
import { PositionTable, type StoredPosition } from './positionTable.js';
import { TagValues } from './tagValues.js';
import { pauseTraceOn, traceSpan } from '../runtime/pauseTrace.js';
import { HistoryMarksWriter } from './historyMarks.js';

export type ScanOutcome =
  | { kind: 'applied'; readsApplied: number; unknownTags: number; locationTags: number }
  /** Stream sequence at or below the shard's applied sequence: its effects are already committed. */
  | { kind: 'redelivered' }
  /** An event id this org has already applied (a re-publish). */
  | { kind: 'duplicate' }
  | { kind: 'dead'; reason: 'unknown_location'; detail: string };

export interface ApplyOptions {
  /** HISTORY_GAP_SECONDS in milliseconds; 0 records every scan as its own history event. */
  historyGapMs: number;
  /**
   * How long an applied event id is remembered for re-publish de-duplication (default 24 h). Redeliveries
   * need no event id (the applied stream sequence covers them), so the table stays bounded by this horizon
   * instead of growing with every scan a parked tag produces.
   */
  eventIdRetentionMs?: number;
  /** Most positions of scan_positions a batch folds the re-read log into (rereadLog.ts foldSliceOf; default DEFAULT_FOLD_SLICE). */
  foldSlice?: number;
  /**
   * The last stream sequence of the batch sent before this one without waiting for its answer
   * (laneScheduler.ts): this batch is refused, nothing changed, unless the stream's applied
   * sequence has reached it. Were that batch to fail, this one would otherwise move the applied
   * sequence past its messages, and their retry would be taken for a redelivery.
   */
  afterSeq?: number;
}

/** What a batch is sent with besides its rules: its time, which event ids are remembered from and pruned against. */
export interface BatchTime {
  /**
   * The latest JetStream timestamp among the batch's messages (ms), so that the batch's effects are
   * a function of its messages; default: the sender's clock (tools and benchmarks that have no stream).
   */
  now?: number;
}

const DEFAULT_EVENT_ID_RETENTION_MS = 86_400_000;

/** Tests: this many of the shard's first scan batches fail before they change anything, as a storage error would. */
let failingBatches = Number(process.env.TRACKD_TEST_FAIL_FIRST_BATCHES) || 0;

/** The current location of an asset and its open visit (its latest history event), as a batch changes it. */
interface Position extends StoredPosition {
  /** Whether its scan_positions row exists (insert copies the asset's liveness; update does not touch it). */
  stored: boolean;
  /** Its slot in the positions table when copied from it (-1: not), valid while the table's layout is still `layout`. */
  slot: number;
  layout: number;
}

/** A position: every one a batch handles is made here, so that all share one shape (the hot loops stay monomorphic). */
function newPosition(
  assetId: number,
  orgId: number,
  locationId: number,
  lastSeenAt: number,
  visitId: number,
  visitStartedAt: number,
  visitReadCount: number,
  visitCount: number,
  stored: boolean,
): Position {
  return { assetId, orgId, locationId, lastSeenAt, visitId, visitStartedAt, visitReadCount, visitCount, stored, slot: -1, layout: -1 };
}

interface HistoryRow {
  asset_id: number;
  event_observed_at: number;
  id: number;
  location_id: number;
  last_seen_at: number;
  read_count: number;
}

/** Most positions (current location and open visit of an asset) kept in memory per shard; 68 bytes a slot (positionTable.ts), up to 136 MiB. */
const MAX_POSITIONS = 1_000_000;

/**
 * Most resolved tags kept per shard. Above MAX_POSITIONS: a cache that starts over when full must not
 * fill on a shard's own tags (at 1,000,000 assets, one per asset, a cap of 1,000,000 emptied it once
 * every asset had been read, and every read went back to SQLite).
 */
const MAX_CACHED_TAGS = 2 * MAX_POSITIONS;

const UNKNOWN = 0;
const LOCATION_TAG = -1;

const POSITION_COLUMNS = 'asset_id, org_id, location_id, last_seen_at, visit_id, visit_started_at, visit_read_count, visit_count';

/** The statements of the scan writer, prepared once on the shard's writer connection. */
function prepareStatements(db: Db) {
  const p = (sql: string) => db.prepare(sql);
  return {
    epoch: p('SELECT epoch, additions FROM scan_resolution_epoch WHERE id = 1'),
    // One statement resolves every uncached tag of a batch (per org and tag type): a statement per
    // tag cost as much as the rest of a first-seen read.
    tags: p(`SELECT t.value, t.asset_id, t.location_id, a.deleted_at AS asset_deleted_at FROM tags t LEFT JOIN assets a ON a.id = t.asset_id
             WHERE t.org_id = ? AND t.tag_type = ? AND t.value IN (SELECT value FROM json_each(?)) AND t.deleted_at IS NULL`),
    locationById: p('SELECT id FROM locations WHERE id = ? AND org_id = ? AND deleted_at IS NULL').pluck(),
    locationByKey: p('SELECT id FROM locations WHERE org_id = ? AND external_key = ? AND deleted_at IS NULL').pluck(),
    locationByTag: p(`SELECT l.id FROM tags t JOIN locations l ON l.id = t.location_id
                      WHERE t.org_id = ? AND t.tag_type = ? AND t.value = ? AND t.deleted_at IS NULL AND l.deleted_at IS NULL`).pluck(),
    // The IN list lets SQLite probe the (org_id, tag_type, value) index once per tag type.
    locationByTagValue: p(`SELECT l.id FROM tags t JOIN locations l ON l.id = t.location_id
                           WHERE t.org_id = ? AND t.tag_type IN (${TAG_TYPES.map((type) => `'${type}'`).join(', ')}) AND t.value = ?
                             AND t.deleted_at IS NULL AND l.deleted_at IS NULL ORDER BY l.id LIMIT 1`).pluck(),
    event: p('INSERT OR IGNORE INTO scan_events (org_id, event_id, seen_at) VALUES (?, ?, ?)'),
    pruneEvents: p('DELETE FROM scan_events WHERE seen_at < ?'),
    position: p(`SELECT ${POSITION_COLUMNS} FROM scan_positions WHERE asset_id = ?`),
    positions: p(`SELECT ${POSITION_COLUMNS} FROM scan_positions WHERE asset_id IN (SELECT value FROM json_each(?))`),
    insertPosition:
      p(`INSERT INTO scan_positions (asset_id, org_id, location_id, last_seen_at, visit_id, visit_started_at, visit_read_count,
                         visit_count, asset_deleted_at, asset_valid_from, asset_valid_to, asset_external_key)
                       SELECT ?, ?, ?, ?, ?, ?, ?, ?, a.deleted_at, a.valid_from, a.valid_to, a.external_key FROM assets a WHERE a.id = ?`),
    updatePosition:
      p(`UPDATE scan_positions SET location_id = ?, last_seen_at = ?, visit_id = ?, visit_started_at = ?, visit_read_count = ?,
                       visit_count = ? WHERE asset_id = ?`),
    // A re-read, or a new visit at the same place, names only the columns it changes: SQLite then
    // leaves the location index alone (naming location_id rewrites its entry even when unchanged).
    extendPosition: p('UPDATE scan_positions SET last_seen_at = ?, visit_read_count = ?, visit_count = ? WHERE asset_id = ?'),
    revisitPosition:
      p(`UPDATE scan_positions SET last_seen_at = ?, visit_id = ?, visit_started_at = ?, visit_read_count = ?, visit_count = ?
                        WHERE asset_id = ?`),
    insertVisit: p(
      'INSERT INTO scan_history (asset_id, event_observed_at, id, location_id, last_seen_at, read_count) VALUES (?, ?, ?, ?, ?, ?)',
    ),
    setNextHistoryId: p('UPDATE scan_history_next SET next_id = ? WHERE id = 1'),
    closeVisit: p('UPDATE scan_history SET last_seen_at = ?, read_count = ? WHERE asset_id = ? AND event_observed_at = ? AND id = ?'),
    visitBefore: p(`SELECT asset_id, event_observed_at, id, location_id, last_seen_at, read_count FROM scan_history
                    WHERE asset_id = ? AND event_observed_at <= ? ORDER BY event_observed_at DESC, id DESC LIMIT 1`),
    extendVisit: p(
      'UPDATE scan_history SET last_seen_at = max(last_seen_at, ?), read_count = read_count + 1 WHERE asset_id = ? AND event_observed_at = ? AND id = ?',
    ),
    appliedSeq: p('SELECT applied_seq FROM scan_ingest_state WHERE stream = ?').pluck(),
    streamIdentity: p('SELECT stream_created FROM scan_ingest_state WHERE stream = ?').pluck(),
    saveApplied: p(`INSERT INTO scan_ingest_state (stream, stream_created, applied_seq) VALUES (?, ?, ?)
                    ON CONFLICT (stream) DO UPDATE SET applied_seq = excluded.applied_seq`),
    bindStream: p(`INSERT INTO scan_ingest_state (stream, stream_created, applied_seq) VALUES (?, ?, 0)
                   ON CONFLICT (stream) DO UPDATE SET stream_created = excluded.stream_created, applied_seq = 0`),
  };
}

/**
 * A shard's scan state: prepared statements on the writer, the positions (current location and
 * open visit of each scanned asset) kept in memory, and caches that resolve tags and locations.
 * All of it is touched only from inside the shard's mailbox.
 */
class ScanStore {
  private readonly positions = new PositionTable();
  /** Resolved tags (asset id, or LOCATION_TAG) and unresolved ones, kept apart so new tags drop only the misses. */
  private readonly tagHits = new TagCache(MAX_CACHED_TAGS);
  private readonly tagMisses = new TagCache(MAX_CACHED_TAGS);
  private readonly locationHits = new Map<string, number>();
  private readonly locationMisses = new Set<string>();
  private readonly applied = new Map<string, number>();
  private epoch = -1;
  private batchStartedAt = 0;
  private additions = -1;
  private nextHistoryId: number;
  /** The batch's `asset.moved` events, appended together once its reads are observed. */
  private moves = new MovedEvents();
  /**
   * The copies of committed positions a batch changes, reused by the next batch: an object per
   * re-read asset and batch (95,000 of 100,000 reads in the field) lived through the batch and was
   * promoted, and the old generation's collections took a share of every batch.
   */
  private readonly spares: Position[] = [];
  private sparesUsed = 0;
  private readonly phaseMs = { resolve: 0, observe: 0, fold: 0, write: 0 };
  private phaseReads = 0;
  private readonly s: ReturnType<typeof prepareStatements>;
  private readonly marks: HistoryMarksWriter;

  constructor(
    private readonly db: Db,
    private readonly report: ReportIndex,
    private readonly events: EventLog,
    private readonly rereads: RereadLog,
  ) {
    this.s = prepareStatements(db);
    this.marks = new HistoryMarksWriter(db);
    this.nextHistoryId = db.prepare('SELECT next_id FROM scan_history_next WHERE id = 1').pluck().get() as number;
  }

  /**
   * Records which incarnation of a stream the applied sequence refers to. A stream deleted and
   * created again restarts at sequence 1: its applied sequence starts over (event ids still guard).
   */
  bindStream(stream: string, created: string): void {
    if (this.s.streamIdentity.get(stream) === created) return;
    this.s.bindStream.run(stream, created);
    this.applied.set(stream, 0);
  }

  /** The applied sequence of `stream` for its incarnation `created` (0 for another one: nothing of it is applied). */
  appliedSeqOf(stream: string, created: string): number {
    return this.s.streamIdentity.get(stream) === created ? this.appliedSeq(stream) : 0;
  }

  appliedSeq(stream: string): number {
    let seq = this.applied.get(stream);
    if (seq === undefined) {
      seq = (this.s.appliedSeq.get(stream) as number | undefined) ?? 0;
      this.applied.set(stream, seq);
    }
    return seq;
  }

  /**
   * Forgets event ids older than the retention horizon before `now`. The horizon moves in steps of
   * about a tenth of the retention (at most a minute), so most batches delete nothing (one index
   * seek) and the deletes come in a few bulk runs per horizon; being a function of `now` alone, the
   * same batches prune the same ids wherever they are applied (a replay, another node).
   */
  private pruneEventIds(retentionMs: number, now: number): void {
    this.batchStartedAt = now;
    const step = Math.min(60_000, Math.max(100, Math.floor(retentionMs / 10)));
    this.s.pruneEvents.run(Math.floor((now - retentionMs) / step) * step);
  }

  /** Applies scans in one transaction; the in-memory positions change only once it commits. */
  applyBatch(items: SourcedScan[], options: ApplyOptions, now: number): ScanOutcome[] {
    if (failingBatches > 0) {
      failingBatches--;
      throw new Error('TRACKD_TEST_FAIL_FIRST_BATCHES: this scan batch fails (a test of the retry)');
    }
    if (options.afterSeq !== undefined && items.length > 0 && this.appliedSeq(items[0]!.stream) < options.afterSeq)
      throw unavailable(
        `The scan batch before this one (through sequence ${options.afterSeq}) is not applied; nothing was changed; retry it first`,
        1,
      );
    const touched = new Map<number, Position>();
    this.sparesUsed = 0;
    const appliedSeqs = new Map<string, number>();
    this.trimPositions();
    // History ids follow the committed rows: a batch that rolls back gives its ids back, so that the
    // ids are a function of the committed batches (a replay of them draws the same).
    const firstHistoryId = this.nextHistoryId;
    const log = this.rereads.begin();
    // The organizations' event heads are written once, before the COMMIT, instead of upserted per movement event.
    const apply = this.db.transaction(() => {
      const outcomes = this.events.withHeldHeads(() => this.applyInTransaction(items, options, now, touched, appliedSeqs, log));
      if (this.nextHistoryId !== firstHistoryId) this.s.setNextHistoryId.run(this.nextHistoryId);
      return outcomes;
    });
    let outcomes: ScanOutcome[];
    const phases = traceSpan('apply');
    try {
      outcomes = apply();
    } catch (err) {
      this.nextHistoryId = firstHistoryId;
      throw err;
    }
    const appliedAt = performance.now();
    this.rereads.committed(log);
    this.events.committed();
    // A stored position was committed before this batch: its copy in `positions` is the old place.
    const movesByOrg = new Map<number, MoveColumns>();
    const fresh: number[] = [];
    for (const [assetId, p] of touched) {
      if (p.stored) {
        let moves = movesByOrg.get(p.orgId);
        if (moves === undefined) movesByOrg.set(p.orgId, (moves = new MoveColumns()));
        const at = this.slotOf(p);
        moves.push(assetId, this.positions.seenAt(at), this.positions.locationAt(at), p.lastSeenAt, p.locationId);
        this.positions.setAt(at, p);
      } else {
        fresh.push(p.orgId, assetId, p.lastSeenAt, p.locationId);
        p.stored = true;
        this.positions.set(assetId, p);
      }
    }
    const committedAt = performance.now();
    for (const [orgId, moves] of movesByOrg) this.report.movedMany(orgId, moves);
    // New positions are judged from their committed rows.
    for (let i = 0; i < fresh.length; i += 4) this.report.moved(fresh[i]!, fresh[i + 1]!, undefined, fresh[i + 2]!, fresh[i + 3]!);
    for (const [stream, seq] of appliedSeqs) this.applied.set(stream, seq);
    if (pauseTraceOn)
      phases({
        ...this.phaseMs,
        after: +(committedAt - appliedAt).toFixed(2),
        index: +(performance.now() - committedAt).toFixed(2),
        reads: this.phaseReads,
        touched: touched.size,
      });
    return outcomes;
  }

  /** The batch's reads and writes inside its transaction: `touched` gets the positions it changed, `appliedSeqs` the streams' new applied sequences. */
  private applyInTransaction(
    items: SourcedScan[],
    options: ApplyOptions,
    now: number,
    touched: Map<number, Position>,
    appliedSeqs: Map<string, number>,
    log: RereadBatch,
  ): ScanOutcome[] {
    this.pruneEventIds(options.eventIdRetentionMs ?? DEFAULT_EVENT_ID_RETENTION_MS, now);
    const { epoch, additions } = this.s.epoch.get() as { epoch: number; additions: number };
    if (epoch !== this.epoch) {
      this.tagHits.clear();
      this.locationHits.clear();
    }
    if (epoch !== this.epoch || additions !== this.additions) {
      this.tagMisses.clear();
      this.locationMisses.clear();
    }
    this.epoch = epoch;
    this.additions = additions;
    let mark = performance.now();
    const lap = () => {
      const at = performance.now();
      const ms = +(at - mark).toFixed(2);
      mark = at;
      return ms;
    };
    const resolved = this.resolveReads(items);
    this.phaseMs.resolve = lap();
    const out: ScanOutcome[] = [];
    let offset = 0;
    this.moves = new MovedEvents();
    for (const item of items) {
      out.push(this.applyOne(item, resolved, offset, options, touched, appliedSeqs));
      offset += item.scan.reads.length;
    }
    this.events.movedMany(this.moves);
    // Before the batch's own writes: a slice of the re-reads logged by earlier batches goes into scan_positions.
    // Sized by the positions the batch touched: a function of its effects, so a replay folds the same slice.
    this.phaseReads = offset;
    this.phaseMs.observe = lap();
    this.rereads.fold(log, foldSliceOf(touched.size, options.foldSlice));
    this.phaseMs.fold = lap();
    const logsRereads = this.rereads.logsRereads(options.foldSlice);
    // The committed positions, read from the table (a copy per touched position would be garbage of every batch).
    const committed = this.positions;
    // In asset-id order: consecutive rows share b-tree pages, which each statement then finds in cache.
    for (const p of inAssetOrder(touched)) {
      const at = p.stored ? this.slotOf(p) : -1;
      const before = at >= 0 && committed.placedAt(at) ? at : -1;
      const sameVisit =
        before >= 0 &&
        committed.locationAt(before) === p.locationId &&
        committed.visitAt(before) === p.visitId &&
        committed.visitStartAt(before) === p.visitStartedAt;
      // A re-read that only extends its open visit is logged (a few bytes in a new page) instead of
      // rewriting its row's page, except on a small table; everything else writes scan_positions,
      // whose row is then newer than the log's.
      if (sameVisit && committed.visitCountAt(before) === p.visitCount && logsRereads) {
        this.rereads.append(log, p.assetId, p.visitId, p.lastSeenAt, p.visitReadCount);
        continue;
      }
      if (p.stored) log.written.push(p.assetId);
      if (sameVisit) this.s.extendPosition.run(p.lastSeenAt, p.visitReadCount, p.visitCount, p.assetId);
      else if (before >= 0 && committed.locationAt(before) === p.locationId)
        this.s.revisitPosition.run(p.lastSeenAt, p.visitId, p.visitStartedAt, p.visitReadCount, p.visitCount, p.assetId);
      else if (p.stored)
        this.s.updatePosition.run(p.locationId, p.lastSeenAt, p.visitId, p.visitStartedAt, p.visitReadCount, p.visitCount, p.assetId);
      else
        this.s.insertPosition.run(
          p.assetId,
          p.orgId,
          p.locationId,
          p.lastSeenAt,
          p.visitId,
          p.visitStartedAt,
          p.visitReadCount,
          p.visitCount,
          p.assetId,
        );
    }
    this.rereads.flush(log);
    for (const [stream, seq] of appliedSeqs) this.s.saveApplied.run(stream, '', seq);
    this.phaseMs.write = lap();
    return out;
  }

  /** `resolved[offset + k]` is what read k of the item resolved to (an asset id, UNKNOWN or LOCATION_TAG). */
  private applyOne(
    item: SourcedScan,
    resolved: number[],
    offset: number,
    options: ApplyOptions,
    touched: Map<number, Position>,
    appliedSeqs: Map<string, number>,
  ): ScanOutcome {
    const { scan, stream, seq } = item;
    if (seq > 0) {
      const applied = appliedSeqs.get(stream) ?? this.appliedSeq(stream);
      if (seq <= applied) return { kind: 'redelivered' };
      appliedSeqs.set(stream, seq);
    }
    const locationId = this.resolveLocation(scan.orgId, scan.location);
    if (locationId === UNKNOWN) {
      return {
        kind: 'dead',
        reason: 'unknown_location',
        detail: `${describeLocation(scan.location)} does not resolve to a live location of org ${scan.orgId}`,
      };
    }
    if (this.s.event.run(scan.orgId, scan.eventId, this.batchStartedAt).changes === 0) return { kind: 'duplicate' };
    let readsApplied = 0;
    let unknownTags = 0;
    let locationTags = 0;
    const seen = scan.reads.length > 1 ? new Set<number>() : undefined;
    for (let k = 0; k < scan.reads.length; k++) {
      const assetId = resolved[offset + k] ?? UNKNOWN;
      if (assetId === UNKNOWN) unknownTags++;
      else if (assetId === LOCATION_TAG) locationTags++;
      else {
        readsApplied++;
        // Several tags of one asset in one scan are one observation of it.
        if (seen !== undefined) {
          if (seen.has(assetId)) continue;
          seen.add(assetId);
        }
        this.observe(scan, assetId, locationId, options.historyGapMs, touched);
      }
    }
    return { kind: 'applied', readsApplied, unknownTags, locationTags };
  }

  /**
   * Resolves every read of a batch, in order: from the caches, and the rest with one query per org
   * and tag type. The positions of assets first met here are loaded together too.
   */
  private resolveReads(items: SourcedScan[]): number[] {
    const resolved: number[] = [];
    const pendingAt: number[] = [];
    const pending: { orgId: number; tagType: string; value: string }[] = [];
    const lookups = new Map<string, { orgId: number; tagType: string; values: Set<string> }>();
    for (const { scan } of items) {
      for (const read of scan.reads) {
        const hit = this.tagHits.get(scan.orgId, read.tagType, read.value);
        if (hit !== undefined) resolved.push(hit);
        else {
          if (this.tagMisses.get(scan.orgId, read.tagType, read.value) === undefined) {
            pendingAt.push(resolved.length);
            pending.push({ orgId: scan.orgId, tagType: read.tagType, value: read.value });
            const group = `${scan.orgId}\u0001${read.tagType}`;
            let lookup = lookups.get(group);
            if (lookup === undefined) lookups.set(group, (lookup = { orgId: scan.orgId, tagType: read.tagType, values: new Set() }));
            lookup.values.add(read.value);
          }
          resolved.push(UNKNOWN);
        }
      }
    }
    if (pendingAt.length === 0) return resolved;
    const found = new TagCache(Number.POSITIVE_INFINITY);
    for (const { orgId, tagType, values } of lookups.values()) {
      const rows = this.s.tags.all(orgId, tagType, JSON.stringify([...values])) as {
        value: string;
        asset_id: number | null;
        location_id: number | null;
        asset_deleted_at: number | null;
      }[];
      const byValue = new Map(rows.map((row) => [row.value, row]));
      for (const value of values) {
        const row = byValue.get(value);
        let assetId = UNKNOWN;
        if (row !== undefined && row.asset_id !== null) assetId = row.asset_deleted_at === null ? row.asset_id : UNKNOWN;
        else if (row !== undefined && row.location_id !== null) assetId = LOCATION_TAG;
        found.set(orgId, tagType, value, assetId);
        (assetId === UNKNOWN ? this.tagMisses : this.tagHits).set(orgId, tagType, value, assetId);
      }
    }
    const unplaced = new Set<number>();
    for (let i = 0; i < pendingAt.length; i++) {
      const { orgId, tagType, value } = pending[i]!;
      const assetId = found.get(orgId, tagType, value) ?? UNKNOWN;
      resolved[pendingAt[i]!] = assetId;
      if (assetId > 0 && !this.positions.has(assetId)) unplaced.add(assetId);
    }
    if (unplaced.size > 0) this.loadPositions([...unplaced]);
    return resolved;
  }

  /**
   * Keeps the positions in memory bounded: between batches, past MAX_POSITIONS a quarter is
   * dropped (each is reloaded from scan_positions when its asset is next scanned).
   */
  private trimPositions(): void {
    if (this.positions.size > MAX_POSITIONS) this.positions.trimTo(Math.floor(MAX_POSITIONS * 0.75));
  }

  /** Loads committed positions (null for an asset never scanned) of assets not yet in memory, in one query. */
  private loadPositions(assetIds: number[]): void {
    const rows = this.s.positions.all(JSON.stringify(assetIds)) as PositionRow[];
    for (const assetId of assetIds) this.positions.set(assetId, null);
    for (const row of rows) this.positions.set(row.asset_id, positionOf(laidOver(this.rereads, row)));
  }

  private resolveLocation(orgId: number, ref: LocationRef): number {
    const key =
      'id' in ref
        ? `${orgId}\u0001#${ref.id}`
        : 'externalKey' in ref
          ? `${orgId}\u0001${ref.externalKey}`
          : 'keyOrTagValue' in ref
            ? `${orgId}\u0002${ref.keyOrTagValue}`
            : `${orgId}\u0001${ref.tagType}\u0001${ref.value}`;
    const hit = this.locationHits.get(key);
    if (hit !== undefined) return hit;
    if (this.locationMisses.has(key)) return UNKNOWN;
    let found: number | undefined;
    if ('id' in ref) found = this.s.locationById.get(ref.id, orgId) as number | undefined;
    else if ('externalKey' in ref) found = this.s.locationByKey.get(orgId, ref.externalKey) as number | undefined;
    else if ('keyOrTagValue' in ref) {
      found = (this.s.locationByKey.get(orgId, ref.keyOrTagValue) ?? this.s.locationByTagValue.get(orgId, ref.keyOrTagValue)) as
        | number
        | undefined;
    } else found = this.s.locationByTag.get(orgId, ref.tagType, ref.value) as number | undefined;
    const id = found ?? UNKNOWN;
    remember(id === UNKNOWN ? this.locationMisses : this.locationHits, key, id, 100_000);
    return id;
  }

  private position(assetId: number, touched: Map<number, Position>): Position | undefined {
    const inBatch = touched.get(assetId);
    if (inBatch !== undefined) return inBatch;
    // The table hands out copies: this one is the batch's to change until it commits.
    let slot = this.positions.find(assetId);
    if (slot < 0) {
      const row = this.s.position.get(assetId) as PositionRow | undefined;
      this.positions.set(assetId, row === undefined ? null : positionOf(laidOver(this.rereads, row)));
      slot = this.positions.find(assetId);
    }
    if (!this.positions.placedAt(slot)) return undefined;
    let copy = this.spares[this.sparesUsed];
    if (copy === undefined) this.spares.push((copy = newPosition(0, 0, 0, 0, 0, 0, 0, 0, false)));
    this.sparesUsed++;
    this.positions.copyTo(slot, copy);
    copy.stored = true;
    copy.slot = slot;
    copy.layout = this.positions.layout;
    touched.set(assetId, copy);
    return copy;
  }

  /** The positions-table slot of a stored position copied from it (found again only if entries moved since). */
  private slotOf(p: Position): number {
    return p.layout === this.positions.layout ? p.slot : this.positions.find(p.assetId);
  }

  private insertVisit(assetId: number, locationId: number, at: number): number {
    const id = this.nextHistoryId++;
    this.s.insertVisit.run(assetId, at, id, locationId, at, 1);
    return id;
  }

  /** Visits: extend the visit a scan falls in, else start an event. */
  /** Carries out the visit rules (visits.ts) for one read of an asset. */
  private observe(scan: CanonicalScan, assetId: number, locationId: number, gapMs: number, touched: Map<number, Position>): void {
    const t = scan.observedAt;
    const p = this.position(assetId, touched);
    const step = visitStep(p, t, locationId, gapMs);
    switch (step.kind) {
      case 'first': {
        this.moves.push(scan.orgId, assetId, undefined, locationId, t);
        const visitId = this.insertVisit(assetId, locationId, t);
        touched.set(assetId, newPosition(assetId, scan.orgId, locationId, t, visitId, t, 1, 1, false));
        return;
      }
      case 'extend':
        p!.lastSeenAt = t;
        p!.visitReadCount++;
        return;
      case 'move':
        if (step.closeOpen) this.s.closeVisit.run(p!.lastSeenAt, p!.visitReadCount, assetId, p!.visitStartedAt, p!.visitId);
        // A new visit at the same place (past the gap) is no move.
        if (p!.locationId !== locationId) this.moves.push(scan.orgId, assetId, p!.locationId, locationId, t);
        p!.visitId = this.insertVisit(assetId, locationId, t);
        // t is at or past every read of the asset so far: the visit comes after all the others.
        this.marks.appended(assetId, t, p!.visitId, p!.visitCount);
        p!.visitCount++;
        p!.locationId = locationId;
        p!.lastSeenAt = t;
        p!.visitStartedAt = t;
        p!.visitReadCount = 1;
        return;
      case 'countInOpen':
        p!.visitReadCount++;
        return;
      case 'late': {
        // History only; the current location stays with the greatest observed_at.
        const before = gapMs > 0 ? (this.s.visitBefore.get(assetId, t) as HistoryRow | undefined) : undefined;
        const earlier =
          before === undefined ? undefined : { id: before.id, locationId: before.location_id, lastSeenAt: before.last_seen_at };
        if (extendsEarlier(earlier, p!.visitId, t, locationId, gapMs))
          this.s.extendVisit.run(t, assetId, before!.event_observed_at, before!.id);
        else {
          const id = this.insertVisit(assetId, locationId, t);
          p!.visitCount++;
          this.marks.inserted(assetId, t, id, p!.visitCount);
        }
        return;
      }
    }
  }
}

/** A scan_positions row as the position statements select it. */
interface PositionRow {
  asset_id: number;
  org_id: number;
  location_id: number;
  last_seen_at: number;
  visit_id: number;
  visit_started_at: number;
  visit_read_count: number;
  visit_count: number;
}

function positionOf(row: PositionRow): Position {
  return newPosition(
    row.asset_id,
    row.org_id,
    row.location_id,
    row.last_seen_at,
    row.visit_id,
    row.visit_started_at,
    row.visit_read_count,
    row.visit_count,
    true,
  );
}

/**
 * A batch's positions in asset-id order, from one numeric sort of asset id x 2^k + insertion
 * index (asset ids are 32-bit: exact within 2^53 for up to 2^21 positions), without a lookup of
 * each in the map afterwards.
 */
function inAssetOrder(touched: Map<number, Position>): Position[] {
  const list = [...touched.values()];
  const n = list.length;
  const shift = 2 ** Math.max(1, Math.ceil(Math.log2(n + 1)));
  if (shift > 2 ** 21) return list.sort((a, b) => a.assetId - b.assetId);
  const keys = new Float64Array(n);
  for (let i = 0; i < n; i++) keys[i] = list[i]!.assetId * shift + i;
  keys.sort();
  const sorted = new Array<Position>(n);
  for (let j = 0; j < n; j++) sorted[j] = list[keys[j]! % shift]!;
  return sorted;
}

/**
 * Tags by organization, tag type and value: a read is looked up without building a key string
 * from its three parts (a string per read, then hashed, was most of the resolution's CPU).
 */
class TagCache {
  private readonly byOrg = new Map<number, Map<string, TagValues>>();
  private size = 0;

  constructor(private readonly max: number) {}

  get(orgId: number, tagType: string, value: string): number | undefined {
    return this.byOrg.get(orgId)?.get(tagType)?.get(value);
  }

  /** Adds; a full cache starts over (cheaper than LRU bookkeeping per read). */
  set(orgId: number, tagType: string, value: string, id: number): void {
    if (this.size >= this.max) this.clear();
    let types = this.byOrg.get(orgId);
    if (types === undefined) this.byOrg.set(orgId, (types = new Map()));
    let values = types.get(tagType);
    if (values === undefined) types.set(tagType, (values = new TagValues()));
    const before = values.size;
    values.set(value, id);
    this.size += values.size - before;
  }

  clear(): void {
    this.byOrg.clear();
    this.size = 0;
  }
}

/** Adds to a bounded cache; a full cache starts over (cheaper than LRU bookkeeping per read). */
function remember(cache: Map<string, number> | Set<string>, key: string, value: number, max: number): void {
  if (cache.size >= max) cache.clear();
  if (cache instanceof Map) cache.set(key, value);
  else cache.add(key);
}

const storeOf = shardState(
  (shard: ShardWriter) => new ScanStore(shard.writer, reportIndexOf(shard), eventLogOf(shard), rereadLogOf(shard)),
);

interface ApplyArgs {
  items: SourcedScan[];
  options: ApplyOptions;
}

/** A scan with its reads as two columns: what a batch is between threads (see packBatch). */
interface PackedScan {
  scan: Omit<CanonicalScan, 'reads'>;
  tagTypes: string[];
  values: string[];
  stream: string;
  seq: number;
}

/**
 * A batch's reads as columns of strings for the port to the shard's thread: the structured clone
 * of one object per read cost the actor's thread about 2 us per read to deserialize (28-36 ms per
 * 15,000 reads, measured with v8.deserialize), the columns and their unpacking 3-5 ms.
 */
export function packBatch({ items, options }: ApplyArgs): { packed: PackedScan[]; options: ApplyOptions } {
  const packed = items.map(({ scan, stream, seq }): PackedScan => {
    const n = scan.reads.length;
    const tagTypes = new Array<string>(n);
    const values = new Array<string>(n);
    for (let i = 0; i < n; i++) {
      tagTypes[i] = scan.reads[i]!.tagType;
      values[i] = scan.reads[i]!.value;
    }
    return {
      scan: { orgId: scan.orgId, eventId: scan.eventId, observedAt: scan.observedAt, location: scan.location },
      tagTypes,
      values,
      stream,
      seq,
    };
  });
  return { packed, options };
}

export function unpackBatch(wire: unknown): ApplyArgs {
  const { packed, options } = wire as { packed: PackedScan[]; options: ApplyOptions };
  const items = packed.map(({ scan, tagTypes, values, stream, seq }): SourcedScan => {
    const reads = new Array<TagRead>(values.length);
    for (let i = 0; i < values.length; i++) reads[i] = { tagType: tagTypes[i]!, value: values[i]! };
    return { scan: { orgId: scan.orgId, eventId: scan.eventId, observedAt: scan.observedAt, location: scan.location, reads }, stream, seq };
  });
  return { items, options };
}

/**
 * Applies canonical scans to a shard in one SQLite transaction, through the shard's mailbox.
 * Every scan source (SCANS consumer, reader adapters, benchmarks) feeds this function; the caller
 * acks its messages only after the returned promise resolves.
 */
const applyCommand = shardCommand(
  'scans.apply',
  (shard, { items, options }: ApplyArgs): ScanOutcome[] => storeOf(shard).applyBatch(items, options, shard.now),
  'scans',
  { journal: scanBatchJournal, ownsTransaction: true, wire: { pack: packBatch, unpack: unpackBatch } },
);

export function applyScanBatch(shard: Shard, items: SourcedScan[], options: ApplyOptions & BatchTime): Promise<ScanOutcome[]> {
  const { now, ...rules } = options;
  // No deadline: the consumer acks only after the answer, so a slow batch is waited for, never dropped.
  return shard.send(applyCommand, { items, options: rules }, { now });
}

const bindCommand = shardCommand(
  'scans.bindStream',
  (shard, { stream, created }: { stream: string; created: string }): void => storeOf(shard).bindStream(stream, created),
  'scans',
);

const appliedSeqCommand = shardCommand(
  'scans.appliedSeq',
  (shard, { stream, created }: { stream: string; created: string }): number => storeOf(shard).appliedSeqOf(stream, created),
  'scans',
  { readOnly: true },
);

/** The last message of `stream` (incarnation `created`) the shard has applied: every one of its messages up to it is in. */
export function appliedSeqOf(shard: Shard, stream: string, created: string): Promise<number> {
  return shard.send(appliedSeqCommand, { stream, created }, {});
}

/** Binds the shard's applied sequence to a stream incarnation (its creation time). */
export function bindStream(shard: Shard, stream: string, created: string): Promise<void> {
  return shard.send(bindCommand, { stream, created }, {});
}

export type { CanonicalScan };
