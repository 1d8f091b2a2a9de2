import path from 'node:path';
import Database from 'better-sqlite3';
import type { Teardown } from './trackd.js';

/** Plain-SQL truths about a shard file, for property tests that compare the API with them. */

/**
 * Every entry of the re-read log, one row each (seq, asset_id, visit_id, last_seen_at,
 * visit_read_count): a block's blob holds its entries in seq order, four little-endian float64s
 * each, the last with seq last_seq (migration 019). Decoded here on its own, not with the
 * service's reader, so that the tests check the encoding too.
 */
export const REREAD_ENTRIES = `SELECT e.seq, e.asset_id, e.visit_id, e.last_seen_at, e.visit_read_count
  FROM scan_reread_blocks b, reread_block(b.entries, b.last_seq) e`;

/** Registers reread_block(entries, last_seq), the table-valued function REREAD_ENTRIES expands a block with. */
export function registerRereadBlock(db: Database.Database): void {
  db.table('reread_block', {
    columns: ['seq', 'asset_id', 'visit_id', 'last_seen_at', 'visit_read_count'],
    parameters: ['entries', 'last_seq'],
    *rows(entries: unknown, lastSeq: unknown) {
      const blob = entries as Buffer;
      const n = blob.length / 32;
      for (let k = 0; k < n; k++) {
        yield [
          (lastSeq as number) - n + 1 + k,
          blob.readDoubleLE(32 * k),
          blob.readDoubleLE(32 * k + 8),
          blob.readDoubleLE(32 * k + 16),
          blob.readDoubleLE(32 * k + 24),
        ];
      }
    },
  });
}

/** How many re-read entries the log holds (all, or of distinct assets with seq above `after`). */
export function loggedEntries(db: Database.Database, options: { distinctAssets?: boolean; after?: number } = {}): number {
  const what = options.distinctAssets ? 'count(DISTINCT asset_id)' : 'count(*)';
  return db
    .prepare(`SELECT ${what} FROM (${REREAD_ENTRIES}) WHERE seq > ?`)
    .pluck()
    .get(options.after ?? -1) as number;
}

export interface Visit {
  event_observed_at: string;
  location_id: number;
  last_seen_at: string;
  read_count: number;
}

/** A visit of the API's history answer, with only the fields compared with SQLite. */
export const visitOf = (v: Visit): Visit => ({
  event_observed_at: v.event_observed_at,
  location_id: v.location_id,
  last_seen_at: v.last_seen_at,
  read_count: v.read_count,
});

/**
 * scan_positions as the service answers from it, in plain SQL: each row with the latest entry of
 * the re-read log (migrations 017 and 019) laid over it when that names the same visit with a
 * greater read count. The truth the property tests compare the report, history and export with
 * (use as `${POSITIONS} p` on a connection from shardDb, which registers reread_block).
 */
export const POSITIONS = `(WITH e AS MATERIALIZED (${REREAD_ENTRIES}),
    latest AS MATERIALIZED (SELECT asset_id, visit_id, last_seen_at, visit_read_count, max(seq) FROM e GROUP BY asset_id)
  SELECT p.asset_id, p.org_id, p.location_id, p.visit_id, p.visit_started_at, p.visit_count,
    p.asset_deleted_at, p.asset_valid_from, p.asset_valid_to,
    CASE WHEN r.visit_read_count > p.visit_read_count THEN r.last_seen_at ELSE p.last_seen_at END AS last_seen_at,
    CASE WHEN r.visit_read_count > p.visit_read_count THEN r.visit_read_count ELSE p.visit_read_count END AS visit_read_count
  FROM scan_positions p LEFT JOIN latest r ON r.asset_id = p.asset_id AND r.visit_id = p.visit_id)`;

export const iso = (ms: number) => new Date(ms).toISOString();

/** The shard file of a one-shard trackd, read-only (WAL: it sees every commit). */
export function shardDb(t: Teardown, dataDir: string): Database.Database {
  const db = new Database(path.join(dataDir, 'shards', 'shard-0.sqlite'), { readonly: true, fileMustExist: true });
  registerRereadBlock(db);
  t.teardown(() => db.close());
  return db;
}

/** An asset's visits the plain way: every history row in order, the open one with its position's running figures (the re-read log laid over). */
/** An asset's visits in time order, equal times by id (`idDesc`: descending, as time by default). */
export function sqlVisits(db: Database.Database, assetId: number, desc: boolean, from?: number, to?: number, idDesc = desc): Visit[] {
  const dir = desc ? 'DESC' : 'ASC';
  const rows = db
    .prepare(
      `SELECT h.event_observed_at, h.location_id,
         CASE WHEN p.visit_id = h.id THEN p.last_seen_at ELSE h.last_seen_at END AS last_seen_at,
         CASE WHEN p.visit_id = h.id THEN p.visit_read_count ELSE h.read_count END AS read_count
       FROM scan_history h LEFT JOIN ${POSITIONS} p ON p.asset_id = h.asset_id
       WHERE h.asset_id = ? AND h.event_observed_at >= ? AND h.event_observed_at <= ?
       ORDER BY h.event_observed_at ${dir}, h.id ${idDesc ? 'DESC' : 'ASC'}`,
    )
    .all(assetId, from ?? -1, to ?? Number.MAX_SAFE_INTEGER) as {
    event_observed_at: number;
    location_id: number;
    last_seen_at: number;
    read_count: number;
  }[];
  return rows.map((r) => ({
    event_observed_at: iso(r.event_observed_at),
    location_id: r.location_id,
    last_seen_at: iso(r.last_seen_at),
    read_count: r.read_count,
  }));
}

/** What the history rank marks (historyMarks.ts) must be after any program: exact ranks, gaps of at most 2 x `spacing`, none on short histories. */
export function markFaults(db: Database.Database, spacing: number): string[] {
  const faults: string[] = [];
  const assets = db.prepare('SELECT asset_id, visit_count FROM scan_positions').all() as { asset_id: number; visit_count: number }[];
  for (const { asset_id, visit_count } of assets) {
    const marks = db
      .prepare(
        `SELECT m.rank, (SELECT count(*) FROM scan_history h WHERE h.asset_id = m.asset_id
                           AND (h.event_observed_at, h.id) < (m.event_observed_at, m.id)) AS counted,
                (SELECT count(*) FROM scan_history h WHERE h.asset_id = m.asset_id
                           AND h.event_observed_at = m.event_observed_at AND h.id = m.id) AS visit
         FROM scan_history_marks m WHERE m.asset_id = ? ORDER BY m.event_observed_at, m.id`,
      )
      .all(asset_id) as { rank: number; counted: number; visit: number }[];
    let previous = 0;
    for (const m of marks) {
      if (m.visit !== 1) faults.push(`asset ${asset_id}: mark at rank ${m.rank} names no visit`);
      if (m.rank !== m.counted) faults.push(`asset ${asset_id}: mark rank ${m.rank}, ${m.counted} visits before it`);
      if (m.rank - previous > 2 * spacing || m.rank <= previous) faults.push(`asset ${asset_id}: gap ${previous} to ${m.rank}`);
      previous = m.rank;
    }
    if (visit_count - previous > 2 * spacing) faults.push(`asset ${asset_id}: last gap ${previous} to ${visit_count}`);
    if (visit_count <= spacing && marks.length > 0) faults.push(`asset ${asset_id}: marks on ${visit_count} visits`);
  }
  return faults;
}
