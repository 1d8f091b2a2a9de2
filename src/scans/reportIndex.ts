import { shardCommand } from '../shards/commands.js';
import { shardState } from '../shards/state.js';
import type { ShardWriter } from '../shards/writer.js';
import type { Db } from '../storage/sqlite.js';
import { RankIndex, unionEntries } from './rankIndex.js';

interface PositionLiveness {
  asset_id: number;
  asset_external_key: string;
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
  /** The asset's external key when the position was last judged (a rename changes it before the trigger runs). */
  key: string;
}

const POSITION_COLUMNS = `p.asset_id, a.external_key AS asset_external_key, p.org_id, p.location_id, p.last_seen_at,
  p.asset_deleted_at, p.asset_valid_from, p.asset_valid_to FROM scan_positions p JOIN assets a ON a.id = p.asset_id`;

/**
 * The positions of one organization, in report order: the live ones, all of them and per current
 * location in -asset_last_seen order, and all of them in -asset_external_key order; and apart, those
 * of soft-deleted assets still within their validity window (for include_deleted, merged with the
 * live ones by rank).
 */
class OrgPositions {
  readonly all = new RankIndex();
  readonly byLocation = new Map<number, RankIndex>();
  readonly deleted = new RankIndex();
  readonly byKey = new RankIndex<string>(false, 1024, true);

  add(assetId: number, lastSeenAt: number, locationId: number, deleted: boolean, key: string | undefined): void {
    if (deleted) {
      this.deleted.insert(lastSeenAt, assetId);
      return;
    }
    // Undefined while the index is built: the keys are inserted afterwards, in order.
    if (key !== undefined) this.byKey.insert(key, assetId);
    this.all.insert(lastSeenAt, assetId);
    let at = this.byLocation.get(locationId);
    if (at === undefined) {
      at = new RankIndex();
      this.byLocation.set(locationId, at);
    }
    at.insert(lastSeenAt, assetId);
  }

  /** Whether the position was a member, live or deleted (undefined: neither, its asset not effective). */
  remove(assetId: number, lastSeenAt: number, locationId: number, key: string): 'live' | 'deleted' | undefined {
    if (!this.all.remove(lastSeenAt, assetId)) return this.deleted.remove(lastSeenAt, assetId) ? 'deleted' : undefined;
    this.byKey.remove(key, assetId);
    const at = this.byLocation.get(locationId);
    if (at !== undefined) {
      at.remove(lastSeenAt, assetId);
      if (at.size === 0) this.byLocation.delete(locationId);
    }
    return 'live';
  }

  /** A scan moved a member (its key, and so its place in byKey, unchanged); false when it is not one. */
  move(assetId: number, before: { lastSeenAt: number; locationId: number }, lastSeenAt: number, locationId: number): boolean {
    if (this.all.remove(before.lastSeenAt, assetId)) {
      const at = this.byLocation.get(before.locationId);
      at?.remove(before.lastSeenAt, assetId);
      if (at?.size === 0) this.byLocation.delete(before.locationId);
      this.add(assetId, lastSeenAt, locationId, false, undefined);
      return true;
    }
    if (!this.deleted.remove(before.lastSeenAt, assetId)) return false;
    this.deleted.insert(lastSeenAt, assetId);
    return true;
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
  /** The keys the page is ordered by: asset_last_seen (numbers) or asset_external_key (strings). */
  keys: number[] | string[];
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
    this.byAsset = db.prepare(`SELECT ${POSITION_COLUMNS} WHERE p.asset_id = ?`);
    db.function('report_index_dirty', { deterministic: false, varargs: false }, (assetId, orgId, lastSeenAt, locationId, key) => {
      this.dirty.push({
        assetId: assetId as number,
        orgId: orgId as number,
        lastSeenAt: lastSeenAt as number,
        locationId: locationId as number,
        key: key as string,
      });
      return null;
    });
    // A liveness change reaches scan_positions from a trigger on assets, so the key read here is the
    // one the position was judged with; a rename passes the old key itself.
    db.exec(`
      CREATE TEMP TRIGGER IF NOT EXISTS report_index_liveness AFTER UPDATE OF asset_deleted_at, asset_valid_from, asset_valid_to ON scan_positions
      BEGIN SELECT report_index_dirty(OLD.asset_id, OLD.org_id, OLD.last_seen_at, OLD.location_id,
        (SELECT external_key FROM assets WHERE id = OLD.asset_id)); END;
      CREATE TEMP TRIGGER IF NOT EXISTS report_index_delete AFTER DELETE ON scan_positions
      BEGIN SELECT report_index_dirty(OLD.asset_id, OLD.org_id, OLD.last_seen_at, OLD.location_id,
        (SELECT external_key FROM assets WHERE id = OLD.asset_id)); END;
      CREATE TEMP TRIGGER IF NOT EXISTS report_index_rename AFTER UPDATE OF external_key ON assets
      BEGIN SELECT report_index_dirty(p.asset_id, p.org_id, p.last_seen_at, p.location_id, OLD.external_key)
        FROM scan_positions p WHERE p.asset_id = NEW.id; END;
    `);
    const rows = db
      .prepare(`SELECT p.asset_id, '' AS asset_external_key, p.org_id, p.location_id, p.last_seen_at, p.asset_deleted_at,
                  p.asset_valid_from, p.asset_valid_to FROM scan_positions p ORDER BY p.org_id, p.last_seen_at DESC, p.asset_id DESC`)
      .iterate() as IterableIterator<PositionLiveness>;
    const live = new Set<number>();
    for (const row of rows) if (this.judge(row, false)) live.add(row.asset_id);
    // The key order from the live-key index, walked in the index's order: each insert appends.
    const keys = db
      .prepare(
        'SELECT org_id, external_key, id FROM assets INDEXED BY assets_live_key WHERE deleted_at IS NULL ORDER BY org_id DESC, external_key DESC',
      )
      .raw()
      .iterate() as IterableIterator<[number, string, number]>;
    for (const [orgId, key, assetId] of keys) if (live.has(assetId)) this.orgs.get(orgId)!.byKey.insert(key, assetId);
  }

  private org(orgId: number): OrgPositions {
    let org = this.orgs.get(orgId);
    if (org === undefined) {
      org = new OrgPositions();
      this.orgs.set(orgId, org);
    }
    return org;
  }

  /**
   * Adds a committed position if its asset is effective at the index's time (live or deleted);
   * remembers its next boundary. True when it joined the live positions (`withKey` false: all but
   * the key order, which the caller fills).
   */
  private judge(row: PositionLiveness, withKey = true): boolean {
    const now = this.judgedAt;
    if (row.asset_valid_from > now) {
      this.boundaries.push(row.asset_valid_from, row.asset_id);
      return false;
    }
    this.settledSince = Math.max(this.settledSince, row.asset_valid_from);
    if (row.asset_valid_to !== null) {
      if (row.asset_valid_to <= now) {
        this.settledSince = Math.max(this.settledSince, row.asset_valid_to);
        return false;
      }
      this.boundaries.push(row.asset_valid_to, row.asset_id);
    }
    const deleted = row.asset_deleted_at !== null;
    this.org(row.org_id).add(row.asset_id, row.last_seen_at, row.location_id, deleted, withKey ? row.asset_external_key : undefined);
    return !deleted;
  }

  /** Judges a position again from its committed row (gone: it leaves the index). */
  private rejudge(d: Dirty): void {
    const { assetId, orgId, lastSeenAt, locationId, key } = d;
    this.orgs.get(orgId)?.remove(assetId, lastSeenAt, locationId, key);
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
    this.orgs.get(orgId)?.move(assetId, before, lastSeenAt, locationId);
  }

  /** After every command (committed or not): the positions its liveness changes touched, judged on the committed rows. */
  settle(): void {
    if (this.dirty.length === 0) return;
    const dirty = this.dirty;
    this.dirty = [];
    for (const d of dirty) this.rejudge(d);
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
      this.orgs.get(row.org_id)?.remove(assetId, row.last_seen_at, row.location_id, row.asset_external_key);
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
    if (org === undefined) return { total: 0, ids: [], keys: [] };
    let total: number;
    let entries: (from: number, count: number) => { ids: number[]; keys: number[] | string[] };
    if (args.byKey === true) {
      if (args.includeDeleted === true || locationId !== undefined) return undefined;
      // Every live position has its key entry; should one ever go missing, SQLite answers.
      if (org.byKey.size !== org.all.size) return undefined;
      total = org.byKey.size;
      entries = (from, count) => org.byKey.entries(from, count);
    } else if (args.includeDeleted === true && locationId === undefined) {
      total = org.all.size + org.deleted.size;
      entries = (from, count) => unionEntries(org.all, org.deleted, from, count);
    } else {
      const index = locationId === undefined ? org.all : org.byLocation.get(locationId);
      if (index === undefined) return { total: 0, ids: [], keys: [] };
      total = index.size;
      entries = (from, count) => index.entries(from, count);
    }
    if (descending) return { total, ...entries(offset, limit) };
    const end = total - offset;
    if (end <= 0) return { total, ids: [], keys: [] };
    const { ids, keys } = entries(Math.max(0, end - limit), Math.min(limit, end));
    return { total, ids: ids.reverse(), keys: keys.reverse() };
  }

  /** Entries and bytes of the rank indexes (for start-up logs and the README's figures). */
  footprint(): { positions: number; bytes: number } {
    let positions = 0;
    let bytes = 0;
    for (const org of this.orgs.values()) {
      positions += org.all.size + org.deleted.size;
      bytes += org.all.bytes() + org.deleted.bytes() + org.byKey.bytes();
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
  /** With soft-deleted assets (whole org only, asset_last_seen order). */
  includeDeleted?: boolean;
  /** In asset_external_key order (whole org, live assets) instead of asset_last_seen. */
  byKey?: boolean;
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
