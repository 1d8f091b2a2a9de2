import type Database from 'better-sqlite3';
import type { StatementCache } from '../storage/sqlite.js';

/**
 * Rank marks of long histories (shard migration 022, table scan_history_marks): for an asset with
 * more than MARK_SPACING visits, every so many of its visits is marked with its rank, the number of
 * the asset's visits before it in (event_observed_at, id) order. SQLite's b-trees do not count
 * their entries, so without the marks a history page at offset k walked min(k, n - k) visits; with
 * them any page, and the count of any time window, seeks to the nearest mark below and walks at
 * most 2 x MARK_SPACING visits past it.
 *
 * The writer keeps them in the transaction that inserts the visit, so they are a function of the
 * committed batches (a replay writes the same rows):
 * - gaps: consecutive marks, the start (rank 0) and the first mark, the last mark and the end
 *   (the visit count) are at most 2 x MARK_SPACING ranks apart;
 * - a visit appended after all others (a move, a new visit) becomes a mark when it is at least
 *   MARK_SPACING ranks past the last mark (or the start): no read of the history;
 * - a visit inserted among earlier ones (a late scan) adds one to the rank of every mark after
 *   it, and when that makes its gap wider than 2 x MARK_SPACING, the visit MARK_SPACING ranks past
 *   the mark below becomes a mark (a walk of MARK_SPACING visits, once per MARK_SPACING inserts
 *   at most).
 * Assets with at most MARK_SPACING visits have no marks and cost the writer nothing.
 */
export const MARK_SPACING = Number(process.env.TRACKD_TEST_HISTORY_MARK_SPACING) || 128;

/** Marks every MARK_SPACING-th visit of the assets with more than that many (shard migration 022; probes). */
export const MARKS_FROM_HISTORY = `
  INSERT INTO scan_history_marks (asset_id, rank, event_observed_at, id)
  SELECT asset_id, rank, event_observed_at, id FROM (
    SELECT asset_id, event_observed_at, id,
           row_number() OVER (PARTITION BY asset_id ORDER BY event_observed_at, id) - 1 AS rank
    FROM scan_history
    WHERE asset_id IN (SELECT asset_id FROM scan_positions WHERE visit_count > ${MARK_SPACING}))
  WHERE rank >= ${MARK_SPACING} AND rank % ${MARK_SPACING} = 0`;

interface Mark {
  rank: number;
  at: number;
  id: number;
}

/** The scan writer's side: keeps the marks as it inserts visits (apply.ts). */
export class HistoryMarksWriter {
  private readonly lastRank: Database.Statement;
  private readonly insert: Database.Statement;
  private readonly shift: Database.Statement;
  private readonly markBefore: Database.Statement;
  private readonly rankAfter: Database.Statement;
  private readonly visitAfter: Database.Statement;
  private readonly visitAt: Database.Statement;

  constructor(db: Database.Database) {
    this.lastRank = db.prepare('SELECT rank FROM scan_history_marks WHERE asset_id = ? ORDER BY rank DESC LIMIT 1').pluck();
    this.insert = db.prepare('INSERT INTO scan_history_marks (asset_id, rank, event_observed_at, id) VALUES (?, ?, ?, ?)');
    this.shift = db.prepare('UPDATE scan_history_marks SET rank = rank + 1 WHERE asset_id = ? AND (event_observed_at, id) > (?, ?)');
    this.markBefore = db.prepare(`SELECT rank, event_observed_at AS at, id FROM scan_history_marks
      WHERE asset_id = ? AND (event_observed_at, id) < (?, ?) ORDER BY event_observed_at DESC, id DESC LIMIT 1`);
    this.rankAfter = db
      .prepare(`SELECT rank FROM scan_history_marks WHERE asset_id = ? AND (event_observed_at, id) > (?, ?)
                ORDER BY event_observed_at, id LIMIT 1`)
      .pluck();
    this.visitAfter = db.prepare(`SELECT event_observed_at AS at, id FROM scan_history
      WHERE asset_id = ? AND (event_observed_at, id) > (?, ?) ORDER BY event_observed_at, id LIMIT 1 OFFSET ?`);
    this.visitAt = db.prepare(
      'SELECT event_observed_at AS at, id FROM scan_history WHERE asset_id = ? ORDER BY event_observed_at, id LIMIT 1 OFFSET ?',
    );
  }

  /** A visit appended after all the asset's others, with `rank` visits before it. */
  appended(assetId: number, at: number, id: number, rank: number): void {
    if (rank < MARK_SPACING) return;
    const last = (this.lastRank.get(assetId) as number | undefined) ?? 0;
    if (rank - last >= MARK_SPACING) this.insert.run(assetId, rank, at, id);
  }

  /** A visit inserted before the asset's latest (a late scan); `visits`: the asset's visits now, this one included. */
  inserted(assetId: number, at: number, id: number, visits: number): void {
    if (visits <= MARK_SPACING) return;
    this.shift.run(assetId, at, id);
    const below = this.markBefore.get(assetId, at, id) as Mark | undefined;
    const above = (this.rankAfter.get(assetId, at, id) as number | undefined) ?? visits;
    const from = below?.rank ?? 0;
    if (above - from <= 2 * MARK_SPACING) return;
    const visit = (
      below === undefined ? this.visitAt.get(assetId, MARK_SPACING) : this.visitAfter.get(assetId, below.at, below.id, MARK_SPACING - 1)
    ) as { at: number; id: number };
    this.insert.run(assetId, from + MARK_SPACING, visit.at, visit.id);
  }
}

/** The greatest mark at or below `rank` (undefined: start from the asset's first visit). */
export function markAtOrBelow(statements: StatementCache, assetId: number, rank: number): Mark | undefined {
  return statements
    .get('SELECT rank, event_observed_at AS at, id FROM scan_history_marks WHERE asset_id = ? AND rank <= ? ORDER BY rank DESC LIMIT 1')
    .get(assetId, rank) as Mark | undefined;
}

/** The asset's visits observed before `time` (ms): the mark below it, then at most 2 x MARK_SPACING visits counted. */
export function visitsBefore(statements: StatementCache, assetId: number, time: number): number {
  const mark = statements
    .get(`SELECT rank, event_observed_at AS at, id FROM scan_history_marks WHERE asset_id = ? AND event_observed_at < ?
          ORDER BY event_observed_at DESC, id DESC LIMIT 1`)
    .get(assetId, time) as Mark | undefined;
  if (mark === undefined) {
    return statements
      .get('SELECT count(*) FROM scan_history WHERE asset_id = ? AND event_observed_at < ?')
      .pluck()
      .get(assetId, time) as number;
  }
  const past = statements
    .get('SELECT count(*) FROM scan_history WHERE asset_id = ? AND (event_observed_at, id) >= (?, ?) AND event_observed_at < ?')
    .pluck()
    .get(assetId, mark.at, mark.id, time) as number;
  return mark.rank + past;
}
