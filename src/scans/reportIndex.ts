import { shardCommand } from '../shards/commands.js';
import { shardState } from '../shards/state.js';
import type { ShardWriter } from '../shards/writer.js';
import type { Db } from '../storage/sqlite.js';
import { RankIndex, unionEntries } from './rankIndex.js';
import { SubtreeTotals, type TreeLink } from './subtreeTotals.js';
import { laidOver, rereadLogOf, SEEN_FUNCTION, type RereadOverlay } from './rereadLog.js';
import { LAST_SEQ_SQL } from '../events/log.js';

interface PositionLiveness {
  asset_id: number;
  asset_external_key: string;
  org_id: number;
  location_id: number;
  last_seen_at: number;
  visit_id: number;
  visit_read_count: number;
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

/** A committed position with its asset's key and liveness, all from the copies on the row (migrations 005 and 021). */
const POSITION_COLUMNS = `p.asset_id, p.asset_external_key, p.org_id, p.location_id, p.last_seen_at,
  p.visit_id, p.visit_read_count, p.asset_deleted_at, p.asset_valid_from, p.asset_valid_to FROM scan_positions p`;

/** The live positions at one location: in -asset_last_seen order, and by asset id (the tiebreak of the location_external_key sort). */
class LocationGroup {
  readonly bySeen = new RankIndex();
  readonly byId = new RankIndex();
  constructor(public key: string) {}
}

/**
 * The positions of one organization, in report order: the live ones, all of them and per current
 * location in -asset_last_seen order, all of them in -asset_external_key order, and the locations
 * that hold them in -location_external_key order; and apart, those of soft-deleted assets still
 * within their validity window (for include_deleted, merged with the live ones by rank).
 */
export class OrgPositions {
  readonly all = new RankIndex();
  readonly byLocation = new Map<number, LocationGroup>();
  readonly deleted = new RankIndex();
  readonly byKey = new RankIndex<string>(false, 1024, true);
  /** (location external key, location id) of every location in byLocation. */
  readonly locationsByKey = new RankIndex<string>(false, 1024, true);
  /** The live positions in each location's subtree, once the console's tree asked for them (undefined again after a tree change). */
  subtree: SubtreeTotals | undefined;

  constructor(private readonly locationKey: (locationId: number) => string) {}

  add(assetId: number, lastSeenAt: number, locationId: number, deleted: boolean, key: string | undefined): void {
    if (deleted) {
      this.deleted.insert(lastSeenAt, assetId);
      return;
    }
    // Undefined while the index is built: the keys are inserted afterwards, in order.
    if (key !== undefined) this.byKey.insert(key, assetId);
    this.all.insert(lastSeenAt, assetId);
    this.place(assetId, lastSeenAt, locationId);
  }

  /** Whether the position was a member, live or deleted (undefined: neither, its asset not effective). */
  remove(assetId: number, lastSeenAt: number, locationId: number, key: string): 'live' | 'deleted' | undefined {
    if (!this.all.remove(lastSeenAt, assetId)) return this.deleted.remove(lastSeenAt, assetId) ? 'deleted' : undefined;
    this.byKey.remove(key, assetId);
    this.unplace(assetId, lastSeenAt, locationId);
    return 'live';
  }

  /** A scan moved a member (its key, and so its place in byKey, unchanged); false when it is not one. */
  move(assetId: number, before: { lastSeenAt: number; locationId: number }, lastSeenAt: number, locationId: number): boolean {
    if (this.all.remove(before.lastSeenAt, assetId)) {
      this.all.insert(lastSeenAt, assetId);
      const at = this.byLocation.get(locationId);
      if (before.locationId === locationId && at !== undefined) {
        // A re-read: its place by asset id stays.
        at.bySeen.remove(before.lastSeenAt, assetId);
        at.bySeen.insert(lastSeenAt, assetId);
      } else {
        this.unplace(assetId, before.lastSeenAt, before.locationId);
        this.place(assetId, lastSeenAt, locationId);
      }
      return true;
    }
    if (!this.deleted.remove(before.lastSeenAt, assetId)) return false;
    this.deleted.insert(lastSeenAt, assetId);
    return true;
  }

  /**
   * A scan batch's moves at once: each rank index takes its removals and its insertions in one
   * pass (removeMany, insertMany; a location's order, rekeyMany) instead of one shift of a block
   * per entry. Same effect as move() for each, in any order (a batch moves an asset once).
   */
  moveMany(moves: MoveColumns): void {
    const n = moves.length;
    const { assetIds, beforeSeen, beforeLocation, seen, location } = moves;
    const found = this.all.removeMany(beforeSeen.subarray(0, n), assetIds.subarray(0, n));
    const liveSeen = new Float64Array(n);
    const liveIds = new Float64Array(n);
    let live = 0;
    // Re-reads (same location) by location: their place by asset id stays, their location's order takes them at once.
    const stays = new Int32Array(n);
    let staying = 0;
    for (let i = 0; i < n; i++) {
      if (!found[i]) {
        if (this.deleted.remove(beforeSeen[i]!, assetIds[i]!)) this.deleted.insert(seen[i]!, assetIds[i]!);
        continue;
      }
      liveSeen[live] = seen[i]!;
      liveIds[live++] = assetIds[i]!;
      if (beforeLocation[i] === location[i] && this.byLocation.has(location[i]!)) stays[staying++] = i;
      else {
        this.unplace(assetIds[i]!, beforeSeen[i]!, beforeLocation[i]!);
        this.place(assetIds[i]!, seen[i]!, location[i]!);
      }
    }
    this.all.insertMany(liveSeen.subarray(0, live), liveIds.subarray(0, live));
    // By location, then batch order: one numeric sort of location x n + index (location ids are integers).
    const byLocation = new Float64Array(staying);
    for (let r = 0; r < staying; r++) byLocation[r] = location[stays[r]!]! * n + stays[r]!;
    byLocation.sort();
    const before = new Float64Array(byLocation.length);
    const after = new Float64Array(byLocation.length);
    const ids = new Float64Array(byLocation.length);
    for (let r = 0; r < byLocation.length; r++) {
      const i = byLocation[r]! % n;
      before[r] = beforeSeen[i]!;
      after[r] = seen[i]!;
      ids[r] = assetIds[i]!;
      byLocation[r] = location[i]!;
    }
    for (let r = 0; r < byLocation.length; ) {
      const from = r;
      while (r < byLocation.length && byLocation[r] === byLocation[from]) r++;
      this.byLocation.get(byLocation[from]!)!.bySeen.rekeyMany(before, after, ids, from, r);
    }
  }

  /** A location's key changed: its place in the location order follows. */
  renameLocation(locationId: number, key: string): void {
    const at = this.byLocation.get(locationId);
    if (at === undefined || at.key === key) return;
    this.locationsByKey.remove(at.key, locationId);
    at.key = key;
    this.locationsByKey.insert(key, locationId);
  }

  /** Ranks from..from+count-1 in -location_external_key order (asset id descending within a location). */
  byLocationKey(from: number, count: number): { ids: number[]; keys: string[] } {
    const ids: number[] = [];
    const keys: string[] = [];
    const locations = this.locationsByKey.entries(0, this.locationsByKey.size).ids;
    let skip = from;
    for (let i = 0; i < locations.length && ids.length < count; i++) {
      const at = this.byLocation.get(locations[i]!)!;
      if (skip >= at.byId.size) {
        skip -= at.byId.size;
        continue;
      }
      for (const id of at.byId.entries(skip, count - ids.length).ids) {
        ids.push(id);
        keys.push(at.key);
      }
      skip = 0;
    }
    return { ids, keys };
  }

  private place(assetId: number, lastSeenAt: number, locationId: number): void {
    let at = this.byLocation.get(locationId);
    if (at === undefined) {
      at = new LocationGroup(this.locationKey(locationId));
      this.byLocation.set(locationId, at);
      this.locationsByKey.insert(at.key, locationId);
    }
    at.bySeen.insert(lastSeenAt, assetId);
    at.byId.insert(assetId, assetId);
    this.subtree?.add(locationId, 1);
  }

  private unplace(assetId: number, lastSeenAt: number, locationId: number): void {
    const at = this.byLocation.get(locationId);
    if (at === undefined || !at.bySeen.remove(lastSeenAt, assetId)) return;
    at.byId.remove(assetId, assetId);
    this.subtree?.add(locationId, -1);
    if (at.bySeen.size === 0) {
      this.byLocation.delete(locationId);
      this.locationsByKey.remove(at.key, locationId);
    }
  }
}

/** A committed position that a scan batch moved: where it was ranked, and where it is now. */
export interface Move {
  assetId: number;
  before: { lastSeenAt: number; locationId: number };
  lastSeenAt: number;
  locationId: number;
}

/** A scan batch's moves of one organization, column by column (no object per move: a batch moves about 95,000). */
export class MoveColumns {
  length = 0;
  assetIds = new Float64Array(16);
  beforeSeen = new Float64Array(16);
  beforeLocation = new Float64Array(16);
  seen = new Float64Array(16);
  location = new Float64Array(16);

  push(assetId: number, beforeSeen: number, beforeLocation: number, seen: number, location: number): void {
    if (this.length === this.assetIds.length) this.grow();
    const i = this.length++;
    this.assetIds[i] = assetId;
    this.beforeSeen[i] = beforeSeen;
    this.beforeLocation[i] = beforeLocation;
    this.seen[i] = seen;
    this.location[i] = location;
  }

  private grow(): void {
    const grown = (from: Float64Array) => {
      const to = new Float64Array(from.length * 2);
      to.set(from);
      return to;
    };
    this.assetIds = grown(this.assetIds);
    this.beforeSeen = grown(this.beforeSeen);
    this.beforeLocation = grown(this.beforeLocation);
    this.seen = grown(this.seen);
    this.location = grown(this.location);
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

/** A page as the index holds it: the asset ids in order, with the key each is ranked by. */
export interface IndexedPage {
  total: number;
  ids: number[];
  /** The keys the page is ordered by: asset_last_seen (numbers), or the asset's or location's external key. */
  keys: number[] | string[];
}

/**
 * The report's orders kept in memory by the shard's actor (issue 13): per organization, the live
 * positions (asset not deleted and currently effective) in `-asset_last_seen` order (all of them,
 * per current location, and with the deleted ones for include_deleted), in asset_external_key
 * order, and in location_external_key order, in rank indexes, so that a page at any offset costs
 * O(√n + limit) instead of SQLite's O(offset) walk. SQLite stays the truth: the index is built from
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
  /** Locations renamed by the running command: (org, location) pairs, judged on the committed rows. */
  private renamedLocations: [number, number][] = [];
  /** Locations (org, id) whose parent or liveness the running command changed: their links are read again and their org's subtree totals rebuilt. */
  private reshaped: [number, number][] = [];
  /** Parent and liveness of locations, as committed: each organization's read in one pass when its subtree totals are first built. */
  private readonly links = new Map<number, TreeLink>();
  private readonly linkedOrgs = new Set<number>();
  private readonly orgLinks;
  private readonly locationKey;
  private readonly locationLink;
  private readonly eventHead;
  /** The index's time: membership was judged at this time (boundaries up to it are applied). */
  private judgedAt: number;
  /** The latest validity boundary the index has applied: a request judged before it is answered from SQLite. */
  private settledSince = Number.NEGATIVE_INFINITY;
  private readonly byAsset;

  /** `rereads`: the re-read log's latest entries, laid over every last_seen_at read from scan_positions. */
  constructor(
    db: Db,
    now: number,
    private readonly rereads: RereadOverlay,
  ) {
    this.judgedAt = now;
    this.byAsset = db.prepare(`SELECT ${POSITION_COLUMNS} WHERE p.asset_id = ?`);
    this.locationKey = db.prepare('SELECT external_key FROM locations WHERE id = ?').pluck();
    this.locationLink = db.prepare('SELECT parent_id, deleted_at FROM locations WHERE id = ?');
    this.orgLinks = db.prepare('SELECT id, parent_id, deleted_at FROM locations WHERE org_id = ?').raw();
    this.eventHead = db.prepare(LAST_SEQ_SQL).pluck();
    db.function('report_index_tree', { deterministic: false, varargs: false }, (orgId, locationId) => {
      this.reshaped.push([orgId as number, locationId as number]);
      return null;
    });
    db.function('report_index_location', { deterministic: false, varargs: false }, (orgId, locationId) => {
      this.renamedLocations.push([orgId as number, locationId as number]);
      return null;
    });
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
    // one the position was judged with; a rename passes the old key itself. last_seen_at with the
    // re-read log laid over (rereads registered the function on this connection).
    const seenOld = `${SEEN_FUNCTION}(OLD.asset_id, OLD.visit_id, OLD.visit_read_count, OLD.last_seen_at)`;
    db.exec(`
      CREATE TEMP TRIGGER IF NOT EXISTS report_index_liveness AFTER UPDATE OF asset_deleted_at, asset_valid_from, asset_valid_to ON scan_positions
      BEGIN SELECT report_index_dirty(OLD.asset_id, OLD.org_id, ${seenOld}, OLD.location_id,
        (SELECT external_key FROM assets WHERE id = OLD.asset_id)); END;
      CREATE TEMP TRIGGER IF NOT EXISTS report_index_delete AFTER DELETE ON scan_positions
      BEGIN SELECT report_index_dirty(OLD.asset_id, OLD.org_id, ${seenOld}, OLD.location_id,
        (SELECT external_key FROM assets WHERE id = OLD.asset_id)); END;
      CREATE TEMP TRIGGER IF NOT EXISTS report_index_location_rename AFTER UPDATE OF external_key ON locations
      BEGIN SELECT report_index_location(NEW.org_id, NEW.id); END;
      CREATE TEMP TRIGGER IF NOT EXISTS report_index_tree_change AFTER UPDATE OF parent_id, deleted_at ON locations
      WHEN OLD.parent_id IS NOT NEW.parent_id OR OLD.deleted_at IS NOT NEW.deleted_at OR OLD.org_id <> NEW.org_id
      BEGIN SELECT report_index_tree(NEW.org_id, NEW.id); SELECT report_index_tree(OLD.org_id, OLD.id); END;
      CREATE TEMP TRIGGER IF NOT EXISTS report_index_tree_delete AFTER DELETE ON locations
      BEGIN SELECT report_index_tree(OLD.org_id, OLD.id); END;
      CREATE TEMP TRIGGER IF NOT EXISTS report_index_rename AFTER UPDATE OF external_key ON assets
      BEGIN SELECT report_index_dirty(p.asset_id, p.org_id, ${SEEN_FUNCTION}(p.asset_id, p.visit_id, p.visit_read_count, p.last_seen_at),
        p.location_id, OLD.external_key)
        FROM scan_positions p WHERE p.asset_id = NEW.id; END;
    `);
    // Read in table order and sorted here: SQLite's sort of a million rows cost twice the read
    // (measured at 1,000,000 positions: 4.4 s of CPU sorted by SQLite in raw mode, 7.3 s as objects;
    // 2.3 s read plus 0.8 s sorted here).
    // The writer's own connection: no row comes or goes between the count and the read.
    const n = db.prepare('SELECT count(*) FROM scan_positions').pluck().get() as number;
    const cols = Array.from({ length: 7 }, () => new Float64Array(n));
    let count = 0;
    const table = db
      .prepare(
        'SELECT asset_id, org_id, location_id, last_seen_at, asset_deleted_at, asset_valid_from, asset_valid_to, visit_id, visit_read_count FROM scan_positions',
      )
      .raw()
      .iterate() as IterableIterator<(number | null)[]>;
    for (const row of table) {
      for (let c = 0; c < 7; c++) cols[c]![count] = row[c] ?? Number.NaN;
      cols[3]![count] = rereads.lastSeen(row[0] as number, row[7] as number, row[8] as number, row[3] as number);
      count++;
    }
    const [assetIds, orgIds, locationIds, seen, deletedAt, validFrom, validTo] = cols as [Float64Array, ...Float64Array[]];
    const order = new Uint32Array(count);
    for (let i = 0; i < count; i++) order[i] = i;
    order.sort((a, b) => orgIds![a]! - orgIds![b]! || seen![b]! - seen![a]! || assetIds[b]! - assetIds[a]!);
    const live = new Set<number>();
    for (const i of order) {
      const row: PositionLiveness = {
        asset_id: assetIds[i]!,
        asset_external_key: '',
        org_id: orgIds![i]!,
        location_id: locationIds![i]!,
        last_seen_at: seen![i]!,
        visit_id: 0,
        visit_read_count: 0,
        asset_deleted_at: Number.isNaN(deletedAt![i]!) ? null : deletedAt![i]!,
        asset_valid_from: validFrom![i]!,
        asset_valid_to: Number.isNaN(validTo![i]!) ? null : validTo![i]!,
      };
      if (this.judge(row, false)) live.add(row.asset_id);
    }
    // The key order from a covering index walked in its order (each insert appends); the live set
    // decides membership, so soft-deleted rows sharing a key are skipped.
    const keys = db
      .prepare('SELECT org_id, external_key, id FROM assets INDEXED BY assets_org_key ORDER BY org_id DESC, external_key DESC, id DESC')
      .raw()
      .iterate() as IterableIterator<[number, string, number]>;
    for (const [orgId, key, assetId] of keys) if (live.has(assetId)) this.orgs.get(orgId)!.byKey.insert(key, assetId);
  }

  private org(orgId: number): OrgPositions {
    let org = this.orgs.get(orgId);
    if (org === undefined) {
      org = new OrgPositions((locationId) => this.locationKey.get(locationId) as string);
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
    const row = this.position(assetId);
    if (row !== undefined) this.judge(row);
  }

  /** A committed position as the index ranks it (its last_seen_at with the re-read log laid over). */
  private position(assetId: number): PositionLiveness | undefined {
    const row = this.byAsset.get(assetId) as PositionLiveness | undefined;
    return row === undefined ? undefined : laidOver(this.rereads, row);
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
      const row = this.position(assetId);
      if (row !== undefined) this.judge(row);
      return;
    }
    this.orgs.get(orgId)?.move(assetId, before, lastSeenAt, locationId);
  }

  /** After a scan batch committed, its moves of stored positions at once (moved() for each, one pass per rank index). */
  movedMany(orgId: number, moves: MoveColumns): void {
    if (moves.length > 0) this.orgs.get(orgId)?.moveMany(moves);
  }

  /** After every command (committed or not): the positions its liveness changes touched, judged on the committed rows. */
  settle(): void {
    if (this.reshaped.length > 0) {
      const reshaped = this.reshaped;
      this.reshaped = [];
      for (const [orgId, locationId] of reshaped) {
        const org = this.orgs.get(orgId);
        if (org !== undefined) org.subtree = undefined;
        // Read as committed (the command may have rolled back).
        this.links.delete(locationId);
        if (this.linkedOrgs.has(orgId)) this.linkOf(locationId);
      }
    }
    if (this.renamedLocations.length > 0) {
      const renamed = this.renamedLocations;
      this.renamedLocations = [];
      for (const [orgId, locationId] of renamed)
        this.orgs.get(orgId)?.renameLocation(locationId, this.locationKey.get(locationId) as string);
    }
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
      const row = this.position(assetId);
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
    if (args.sortBy === 'asset_external_key' || args.sortBy === 'location_external_key') {
      if (args.includeDeleted === true || locationId !== undefined) return undefined;
      // Every live position has its key entry; should one ever go missing, SQLite answers.
      if (org.byKey.size !== org.all.size) return undefined;
      total = org.all.size;
      entries =
        args.sortBy === 'asset_external_key'
          ? (from, count) => org.byKey.entries(from, count)
          : (from, count) => org.byLocationKey(from, count);
    } else if (args.includeDeleted === true && locationId === undefined) {
      total = org.all.size + org.deleted.size;
      entries = (from, count) => unionEntries(org.all, org.deleted, from, count);
    } else {
      const index = locationId === undefined ? org.all : org.byLocation.get(locationId)?.bySeen;
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

  /**
   * Per location, the live positions at it and in its subtree (the console's tree), with the
   * organization's event sequence they reflect exactly: the actor runs one command at a time, so
   * no commit lands between the two. Undefined when the index cannot answer for `now`.
   */
  treeCounts(orgId: number, ids: number[], now: number): TreeCounts | undefined {
    this.settle();
    this.advance(now);
    if (now < this.settledSince) return undefined;
    const asOfSeq = (this.eventHead.get(orgId) as number | undefined) ?? 0;
    const org = this.orgs.get(orgId);
    if (org === undefined) return { asOfSeq, here: ids.map(() => 0), subtree: ids.map(() => 0) };
    if (org.subtree === undefined) {
      if (!this.linkedOrgs.has(orgId)) {
        for (const [id, parent, deletedAt] of this.orgLinks.iterate(orgId) as IterableIterator<[number, number | null, number | null]>)
          this.links.set(id, { parent, live: deletedAt === null });
        this.linkedOrgs.add(orgId);
      }
      const totals = new SubtreeTotals((id) => this.linkOf(id));
      for (const [locationId, at] of org.byLocation) totals.add(locationId, at.bySeen.size);
      org.subtree = totals;
    }
    const totals = org.subtree;
    return {
      asOfSeq,
      here: ids.map((id) => org.byLocation.get(id)?.bySeen.size ?? 0),
      subtree: ids.map((id) => totals.get(id)),
    };
  }

  /**
   * The positions at some locations of an organization, for the report's SQLite side (reportQuery.ts
   * `assetLocationsReport`): a superset of those the report counts there at the returned time. The live ones at
   * each location, and with `includeDeleted` every deleted one of the organization (their location is
   * left to SQLite). Every change of which positions are at a location, and of their liveness, is an
   * event of the organization (a scan's asset.moved, an asset's update or delete), so a reader whose
   * snapshot's last event sequence is `asOfSeq` sees these positions; a validity boundary is no
   * event, so it judges liveness at `at`. Undefined when the index cannot answer for `now`, or when
   * the positions are too many to pass by id (SQLite then walks the organization).
   */
  locationMembers(orgId: number, locationIds: number[], includeDeleted: boolean, now: number): LocationMembers | undefined {
    this.settle();
    this.advance(now);
    if (now < this.settledSince) return undefined;
    const asOfSeq = (this.eventHead.get(orgId) as number | undefined) ?? 0;
    const org = this.orgs.get(orgId);
    const ids: number[] = [];
    if (org !== undefined) {
      let count = includeDeleted ? org.deleted.size : 0;
      const groups = [...new Set(locationIds)].map((id) => org.byLocation.get(id)).filter((g) => g !== undefined);
      for (const group of groups) count += group.byId.size;
      if (count > MAX_MEMBERS_BY_ID) return undefined;
      for (const group of groups) for (const id of group.byId.entries(0, group.byId.size).ids) ids.push(id);
      if (includeDeleted) for (const id of org.deleted.entries(0, org.deleted.size).ids) ids.push(id);
    }
    return { ids, asOfSeq, at: this.judgedAt };
  }

  /**
   * Whether an organization's live positions, as the last command left them (no settle: this runs
   * inside a command's transaction), include one at a location; with the time they were judged at,
   * so that the caller can look for the positions the index leaves out (outside their validity then).
   */
  hasLivePositionAt(orgId: number, locationId: number): { found: boolean; judgedAt: number } {
    const group = this.orgs.get(orgId)?.byLocation.get(locationId);
    return { found: group !== undefined && group.bySeen.size > 0, judgedAt: this.judgedAt };
  }

  private linkOf(locationId: number): TreeLink | undefined {
    let link = this.links.get(locationId);
    if (link === undefined) {
      const row = this.locationLink.get(locationId) as { parent_id: number | null; deleted_at: number | null } | undefined;
      if (row === undefined) return undefined;
      link = { parent: row.parent_id, live: row.deleted_at === null };
      this.links.set(locationId, link);
    }
    return link;
  }

  /** Entries and bytes of the rank indexes (for start-up logs and the README's figures). */
  footprint(): { positions: number; bytes: number } {
    let positions = 0;
    let bytes = 0;
    for (const org of this.orgs.values()) {
      positions += org.all.size + org.deleted.size;
      bytes += org.all.bytes() + org.deleted.bytes() + org.byKey.bytes() + org.locationsByKey.bytes();
      for (const at of org.byLocation.values()) bytes += at.bySeen.bytes() + at.byId.bytes();
    }
    return { positions, bytes };
  }
}

/** The shard's report index, built on first use (the shard worker builds it at start). */
export const reportIndexOf = shardState((shard: ShardWriter) => {
  const index = new ReportIndex(shard.writer, shard.now || Date.now(), rereadLogOf(shard));
  shard.afterEachCommand(() => index.settle());
  return index;
});

export interface ReportPageArgs {
  orgId: number;
  locationId?: number;
  /** With soft-deleted assets (whole org only, asset_last_seen order). */
  includeDeleted?: boolean;
  /** The sort field; asset_external_key and location_external_key: whole org, live assets only. */
  sortBy: 'asset_last_seen' | 'asset_external_key' | 'location_external_key';
  descending: boolean;
  offset: number;
  limit: number;
}

/** Positions passed by id to the report's SQLite side at most; beyond, it walks the organization's positions. */
const MAX_MEMBERS_BY_ID = 50_000;

export interface LocationMembers {
  /** Asset ids: every position the report counts at the locations at `at` is among them. */
  ids: number[];
  /** The organization's last event sequence when they were taken. */
  asOfSeq: number;
  /** The time liveness was judged at. */
  at: number;
}

export const locationMembersCommand = shardCommand(
  'scans.locationMembers',
  (shard, args: { orgId: number; locationIds: number[]; includeDeleted: boolean }): LocationMembers | undefined =>
    reportIndexOf(shard).locationMembers(args.orgId, args.locationIds, args.includeDeleted, shard.now),
  'scans',
  { readOnly: true },
);

export interface TreeCounts {
  /** The organization's last event sequence: the counts reflect every event up to it and none after. */
  asOfSeq: number;
  /** Per asked location: the live positions at it (the report filtered by it). */
  here: number[];
  /** Per asked location: the live positions at it and below it. */
  subtree: number[];
}

export const treeCountsCommand = shardCommand(
  'scans.treeCounts',
  (shard, args: { orgId: number; ids: number[] }): TreeCounts | undefined =>
    reportIndexOf(shard).treeCounts(args.orgId, args.ids, shard.now),
  'scans',
  { readOnly: true },
);

export const reportPageCommand = shardCommand(
  'scans.reportPage',
  (shard, args: ReportPageArgs): IndexedPage | undefined => reportIndexOf(shard).page(args, shard.now),
  'scans',
  { readOnly: true },
);
