import path from 'node:path';
import Database from 'better-sqlite3';
import type { Teardown } from './trackd.js';

/** Plain-SQL truths about a shard file, for property tests that compare the API with them. */

export interface Visit {
  event_observed_at: string;
  location_id: number;
  last_seen_at: string;
  read_count: number;
}

/**
 * scan_positions as the service answers from it, in plain SQL: each row with the latest row of the
 * re-read log (migration 017) laid over it when that names the same visit with a greater read count.
 * The truth the property tests compare the report, history and export with (use as `${POSITIONS} p`).
 */
export const POSITIONS = `(SELECT p.asset_id, p.org_id, p.location_id, p.visit_id, p.visit_started_at, p.visit_count,
    p.asset_deleted_at, p.asset_valid_from, p.asset_valid_to,
    CASE WHEN r.visit_read_count > p.visit_read_count THEN r.last_seen_at ELSE p.last_seen_at END AS last_seen_at,
    CASE WHEN r.visit_read_count > p.visit_read_count THEN r.visit_read_count ELSE p.visit_read_count END AS visit_read_count
  FROM scan_positions p LEFT JOIN scan_rereads r
    ON r.seq = (SELECT max(seq) FROM scan_rereads l WHERE l.asset_id = p.asset_id) AND r.visit_id = p.visit_id)`;

export const iso = (ms: number) => new Date(ms).toISOString();

/** The shard file of a one-shard trackd, read-only (WAL: it sees every commit). */
export function shardDb(t: Teardown, dataDir: string): Database.Database {
  const db = new Database(path.join(dataDir, 'shards', 'shard-0.sqlite'), { readonly: true, fileMustExist: true });
  t.teardown(() => db.close());
  return db;
}

/** An asset's visits the plain way: every history row in order, the open one with its position's running figures (the re-read log laid over). */
export function sqlVisits(db: Database.Database, assetId: number, desc: boolean, from?: number, to?: number): Visit[] {
  const dir = desc ? 'DESC' : 'ASC';
  const rows = db
    .prepare(
      `SELECT h.event_observed_at, h.location_id,
         CASE WHEN p.visit_id = h.id THEN p.last_seen_at ELSE h.last_seen_at END AS last_seen_at,
         CASE WHEN p.visit_id = h.id THEN p.visit_read_count ELSE h.read_count END AS read_count
       FROM scan_history h LEFT JOIN ${POSITIONS} p ON p.asset_id = h.asset_id
       WHERE h.asset_id = ? AND h.event_observed_at >= ? AND h.event_observed_at <= ?
       ORDER BY h.event_observed_at ${dir}, h.id ${dir}`,
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
