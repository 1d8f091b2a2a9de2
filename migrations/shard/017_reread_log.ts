import type { Knex } from 'knex';

export const name = '017_reread_log';

/**
 * Re-reads of parked tags without a page each (issue 13, docs/field-rereads.md).
 *
 * - scan_rereads: a re-read that only extends its open visit (last_seen_at and the visit's read
 *   count of one scan_positions row) is appended here in arrival order instead of rewriting its
 *   scan_positions row, which lies in a random page: a batch of them fills a few new pages instead
 *   of rewriting nearly every page of scan_positions. `seq` is drawn by the writer (never reused,
 *   also once the log was emptied). The latest row of an asset lays its figures over its
 *   scan_positions row when both name the same visit and the row's read count is the greater
 *   (both only grow within a visit; a move writes scan_positions itself).
 * - scan_reread_fold: where the fold stands. Each scan batch writes the latest figures of the
 *   re-read assets of one slice of scan_positions (the next positions in asset-id order after
 *   `cursor`); when a slice reaches the end, the log rows up to `cycle_seq` (all appended before
 *   the cycle that just ended began, so every slice has taken them in since) are deleted,
 *   `folded_through` records that, and a new cycle begins with `cycle_seq` at the last row then.
 *   All of it is a function of the committed batches, so a replay of them writes the same rows.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE scan_rereads (
      seq INTEGER PRIMARY KEY,
      asset_id INTEGER NOT NULL,
      visit_id INTEGER NOT NULL,
      last_seen_at INTEGER NOT NULL,
      visit_read_count INTEGER NOT NULL
    )`);
  await knex.raw(`
    CREATE TABLE scan_reread_fold (
      id INTEGER PRIMARY KEY CHECK (id = 1),
      cursor INTEGER NOT NULL,
      cycle_seq INTEGER NOT NULL,
      folded_through INTEGER NOT NULL
    )`);
  await knex.raw('INSERT INTO scan_reread_fold (id, cursor, cycle_seq, folded_through) VALUES (1, 0, 0, 0)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE scan_reread_fold');
  await knex.raw('DROP TABLE scan_rereads');
}
