import { shardCommand } from '../shards/commands.js';
import { shardState } from '../shards/state.js';
import type { ShardWriter } from '../shards/writer.js';
import type { Db } from '../storage/sqlite.js';
import { RankIndex, unionEntries } from './rankIndex.js';

interface PositionLiveness {
  asset_id: number;
  org_id: number;
  location_id: number;
  last_seen_at: number;
  asset_deleted_at: number | null;
  asset_valid_from: number;
  asset_valid_to: number | null;
}

/** A position whose membership must be judged again after the running command (a liveness change, a delete). */
interface Dirty {
  assetId: number;
  orgId: number;
  lastSeenAt: number;
  locationId: number;
}

/**
 * The positions of one organization, in report order: the live ones, all of them and per current
 * location; and apart, those of soft-deleted assets still within their validity window (for
 * include_deleted, merged with the live ones by rank).
 */
class OrgPositions {
  readonly all = new RankIndex();
  readonly byLocation = new Map<number, RankIndex>();
  readonly deleted = new RankIndex();

  add(assetId: number, lastSeenAt: number, locationId: number, deleted: boolean): void {
    if (deleted) {
      this.deleted.insert(lastSeenAt, assetId);
      return;
    }
    this.all.insert(lastSeenAt, assetId);
    let at = this.byLocation.get(locationId);
    if (at === undefined) {
      at = new RankIndex();
      this.byLocation.set(locationId, at);
    }
    at.insert(lastSeenAt, assetId);
  }

  /** Whether the position was a member, live or deleted (undefined: neither, its asset not effective). */
  remove(assetId: number, lastSeenAt: number, locationId: number): 'live' | 'deleted' | undefined {
    if (!this.all.remove(lastSeenAt, assetId)) return this.deleted.remove(lastSeenAt, assetId) ? 'deleted' : undefined;
    const at = this.byLocation.get(locationId);
    if (at !== undefined) {
      at.remove(lastSeenAt, assetId);
      if (at.size === 0) this.byLocation.delete(locationId);
    }
    return 'live';
  }
}

/** A min-heap of (time, asset id): validity boundaries still ahead of the index's time. */
class Boundaries {
  private readonly at: number[] = [];
  private readonly ids: number[] = [];

  get size(): number {
    return this.at.length;
  }

  push(time: number, assetId: number): void {
    let i = this.at.length;
    this.at.push(time);
    this.ids.push(assetId);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (this.at[parent]! <= time) break;
      this.swap(i, parent);
      i = parent;
    }
  }

  /** Removes and returns the asset ids of every boundary at or before `time`, with the latest such time. */
  popThrough(time: number): { ids: number[]; latest: number } {
    const ids: number[] = [];
    let latest = Number.NEGATIVE_INFINITY;
    while (this.at.length > 0 && this.at[0]! <= time) {
      latest = Math.max(latest, this.at[0]!);
      ids.push(this.ids[0]!);
      const lastAt = this.at.pop()!;
      const lastId = this.ids.pop()!;
      if (this.at.length === 0) break;
      this.at[0] = lastAt;
      this.ids[0] = lastId;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < this.at.length && this.at[l]! < this.at[m]!) m = l;
        if (r < this.at.length && this.at[r]! < this.at[m]!) m = r;
        if (m === i) break;
        this.swap(i, m);
        i = m;
      }
    }
    return { ids, latest };
  }

  private swap(a: number, b: number): void {
    [this.at[a], this.at[b]] = [this.at[b]!, this.at[a]!];
    [this.ids[a], this.ids[b]] = [this.ids[b]!, this.ids[a]!];
  }
}

/** A page as the index holds it: the asset ids in order, with the asset_last_seen each is ranked by. */
export interface IndexedPage {
  total: number;
  ids: number[];
  lastSeen: number[];
}

/**
 * The report's order kept in memory by the shard's actor (issue 13): per organization, the live
 * positions (asset not deleted and currently effective) in `-asset_last_seen` order, all of them
 * and per current location, in rank indexes, so that a page at any offset costs O(√n + limit)
 * instead of SQLite's O(offset) walk. SQLite stays the truth: the index is built from
 * scan_positions when the actor starts, follows the scan batches' moves after each commit, and
 * judges again (from the committed row) every position whose asset's liveness a command changed
 * (temporary triggers on the writer's connection record them) or whose validity boundary passed.
 * The actor answers with ids and their asset_last_seen only; the asking thread reads the rows
 * from its own connection and checks them against those (reportQuery.ts), so that the actor's
 * share of a page is microseconds.
 */
export class ReportIndex {
  private readonly orgs = new Map<number, OrgPositions>();
  private readonly boundaries = new Boundaries();
  private dirty: Dirty[] = [];
  /** The index's time: membership was judged at this time (boundaries up to it are applied). */
  private judgedAt: number;
  /** The latest validity boundary the index has applied: a request judged before it is answered from SQLite. */
  private settledSince = Number.NEGATIVE_INFINITY;
  private readonly byAsset;

  constructor(db: Db, now: number) {
    this.judgedAt = now;
    this.byAsset = db.prepare(
      'SELECT asset_id, org_id, location_id, last_seen_at, asset_deleted_at, asset_valid_from, asset_valid_to FROM scan_positions WHERE asset_id = ?',
    );
    db.function('report_index_dirty', { deterministic: false, varargs: false }, (assetId, orgId, lastSeenAt, locationId) => {
      this.dirty.push({
        assetId: assetId as number,
        orgId: orgId as number,
        lastSeenAt: lastSeenAt as number,
        locationId: locationId as number,
      });
      return null;
    });
    db.exec(`
      CREATE TEMP TRIGGER IF NOT EXISTS report_index_liveness AFTER UPDATE OF asset_deleted_at, asset_valid_from, asset_valid_to ON scan_positions
      BEGIN SELECT report_index_dirty(OLD.asset_id, OLD.org_id, OLD.last_seen_at, OLD.location_id); END;
      CREATE TEMP TRIGGER IF NOT EXISTS report_index_delete AFTER DELETE ON scan_positions
      BEGIN SELECT report_index_dirty(OLD.asset_id, OLD.org_id, OLD.last_seen_at, OLD.location_id); END;
    `);
    const rows = db
      .prepare(
        'SELECT asset_id, org_id, location_id, last_seen_at, asset_deleted_at, asset_valid_from, asset_valid_to FROM scan_positions ORDER BY org_id, last_seen_at DESC, asset_id DESC',
      )
      .iterate() as IterableIterator<PositionLiveness>;
    for (const row of rows) this.judge(row);
  }

  private org(orgId: number): OrgPositions {
    let org = this.orgs.get(orgId);
    if (org === undefined) {
      org = new OrgPositions();
      this.orgs.set(orgId, org);
    }
    return org;
  }

  /** Adds a committed position if its asset is effective at the index's time (live or deleted); remembers its next boundary. */
  private judge(row: PositionLiveness): void {
    const now = this.judgedAt;
    if (row.asset_valid_from > now) {
      this.boundaries.push(row.asset_valid_from, row.asset_id);
      return;
    }
    this.settledSince = Math.max(this.settledSince, row.asset_valid_from);
    if (row.asset_valid_to !== null) {
      if (row.asset_valid_to <= now) {
        this.settledSince = Math.max(this.settledSince, row.asset_valid_to);
        return;
      }
      this.boundaries.push(row.asset_valid_to, row.asset_id);
    }
    this.org(row.org_id).add(row.asset_id, row.last_seen_at, row.location_id, row.asset_deleted_at !== null);
  }

  /** Judges a position again from its committed row (gone: it leaves the index). */
  private rejudge(assetId: number, orgId: number, lastSeenAt: number, locationId: number): void {
    this.orgs.get(orgId)?.remove(assetId, lastSeenAt, locationId);
    const row = this.byAsset.get(assetId) as PositionLiveness | undefined;
    if (row !== undefined) this.judge(row);
  }

  /**
   * After a scan batch committed: a position that moved keeps its membership (a scan changes no
   * liveness), a new one is judged from its row.
   */
  moved(
    orgId: number,
    assetId: number,
    before: { lastSeenAt: number; locationId: number } | undefined,
    lastSeenAt: number,
    locationId: number,
  ): void {
    if (before === undefined) {
      const row = this.byAsset.get(assetId) as PositionLiveness | undefined;
      if (row !== undefined) this.judge(row);
      return;
    }
    const org = this.orgs.get(orgId);
    const was = org?.remove(assetId, before.lastSeenAt, before.locationId);
    if (was !== undefined) org!.add(assetId, lastSeenAt, locationId, was === 'deleted');
  }

  /** After every command (committed or not): the positions its liveness changes touched, judged on the committed rows. */
  settle(): void {
    if (this.dirty.length === 0) return;
    const dirty = this.dirty;
    this.dirty = [];
    for (const d of dirty) this.rejudge(d.assetId, d.orgId, d.lastSeenAt, d.locationId);
  }

  /** Moves the index's time to `now`, applying the validity boundaries passed. */
  private advance(now: number): void {
    if (now <= this.judgedAt) return;
    this.judgedAt = now;
    if (this.boundaries.size === 0) return;
    const { ids, latest } = this.boundaries.popThrough(now);
    if (ids.length === 0) return;
    this.settledSince = Math.max(this.settledSince, latest);
    for (const assetId of new Set(ids)) {
      const row = this.byAsset.get(assetId) as PositionLiveness | undefined;
      if (row === undefined) continue;
      this.orgs.get(row.org_id)?.remove(assetId, row.last_seen_at, row.location_id);
      this.judge(row);
    }
  }

  /**
   * One page of the report in `asset_last_seen` order (descending, or ascending), of the whole org
   * (with or without deleted assets) or of one location (live assets); undefined when the index
   * cannot answer for `now` (a time before a boundary it already applied), and the caller asks SQLite.
   */
  page(args: ReportPageArgs, now: number): IndexedPage | undefined {
    const { orgId, locationId, descending, offset, limit } = args;
    this.settle();
    this.advance(now);
    if (now < this.settledSince) return undefined;
    const org = this.orgs.get(orgId);
    if (org === undefined) return { total: 0, ids: [], lastSeen: [] };
    let total: number;
    let entries: (from: number, count: number) => { ids: number[]; keys: number[] };
    if (args.includeDeleted === true && locationId === undefined) {
      total = org.all.size + org.deleted.size;
      entries = (from, count) => unionEntries(org.all, org.deleted, from, count);
    } else {
      const index = locationId === undefined ? org.all : org.byLocation.get(locationId);
      if (index === undefined) return { total: 0, ids: [], lastSeen: [] };
      total = index.size;
      entries = (from, count) => index.entries(from, count);
    }
    if (descending) {
      const { ids, keys } = entries(offset, limit);
      return { total, ids, lastSeen: keys };
    }
    const end = total - offset;
    if (end <= 0) return { total, ids: [], lastSeen: [] };
    const { ids, keys } = entries(Math.max(0, end - limit), Math.min(limit, end));
    return { total, ids: ids.reverse(), lastSeen: keys.reverse() };
  }

  /** Entries and bytes of the rank indexes (for start-up logs and the README's figures). */
  footprint(): { positions: number; bytes: number } {
    let positions = 0;
    let bytes = 0;
    for (const org of this.orgs.values()) {
      positions += org.all.size + org.deleted.size;
      bytes += org.all.bytes() + org.deleted.bytes();
      for (const at of org.byLocation.values()) bytes += at.bytes();
    }
    return { positions, bytes };
  }
}

/** The shard's report index, built on first use (the shard worker builds it at start). */
export const reportIndexOf = shardState((shard: ShardWriter) => {
  const index = new ReportIndex(shard.writer, shard.now || Date.now());
  shard.afterEachCommand(() => index.settle());
  return index;
});

export interface ReportPageArgs {
  orgId: number;
  locationId?: number;
  /** With soft-deleted assets (whole org only). */
  includeDeleted?: boolean;
  descending: boolean;
  offset: number;
  limit: number;
}

export const reportPageCommand = shardCommand(
  'scans.reportPage',
  (shard, args: ReportPageArgs): IndexedPage | undefined => reportIndexOf(shard).page(args, shard.now),
  'scans',
  { readOnly: true },
);
