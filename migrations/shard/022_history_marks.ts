import type { Knex } from 'knex';
import { MARKS_FROM_HISTORY } from '../../src/scans/historyMarks.js';

export const name = '022_history_marks';

/**
 * scan_history_marks: every MARK_SPACING-th visit of an asset with more visits than that, with its
 * rank (src/scans/historyMarks.ts), so that a history page at any offset, and the count of any time
 * window, seeks to a mark and walks at most 2 x MARK_SPACING visits, where a page in the middle of
 * 100,000 visits walked 50,000. Keyed like scan_history, with the ranks indexed for the page's seek.
 * Built here from the visits of the assets that need them (a range read of each).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE scan_history_marks (
      asset_id INTEGER NOT NULL,
      event_observed_at INTEGER NOT NULL,
      id INTEGER NOT NULL,
      rank INTEGER NOT NULL,
      PRIMARY KEY (asset_id, event_observed_at, id)
    ) WITHOUT ROWID`);
  await knex.raw('CREATE INDEX scan_history_marks_rank ON scan_history_marks (asset_id, rank)');
  await knex.raw(MARKS_FROM_HISTORY);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE scan_history_marks');
}
