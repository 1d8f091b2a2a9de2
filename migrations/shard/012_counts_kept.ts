import type { Knex } from 'knex';

export const name = '012_counts_kept';

const MASTER_TABLES = ['assets', 'locations'];

/**
 * Counts kept as rows change instead of counted by reads (issue 13):
 * - scan_positions.visit_count: the asset's visits (its scan_history rows), written with the
 *   position by the scan writer, so that a history page's total_count is one row read instead of a
 *   walk of every visit (12 ms at 100,000 visits).
 * - master_live_counts: per table, org and is_active, the rows not soft-deleted, kept by triggers,
 *   so that the list's total_count without q or keys is that count less the live rows outside their
 *   validity window (two ranges of the valid_from / valid_to indexes of migration 008) instead of a
 *   count of every live row (0.1-0.8 s at 1,000,000 assets).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE scan_positions ADD COLUMN visit_count INTEGER NOT NULL DEFAULT 0');
  await knex.raw(
    `UPDATE scan_positions SET visit_count = (SELECT count(*) FROM scan_history h WHERE h.asset_id = scan_positions.asset_id)`,
  );
  await knex.raw(`
    CREATE TABLE master_live_counts (
      tbl TEXT NOT NULL,
      org_id INTEGER NOT NULL,
      is_active INTEGER NOT NULL,
      live INTEGER NOT NULL,
      PRIMARY KEY (tbl, org_id, is_active)
    ) WITHOUT ROWID`);
  for (const table of MASTER_TABLES) {
    await knex.raw(`INSERT INTO master_live_counts (tbl, org_id, is_active, live)
                    SELECT '${table}', org_id, is_active, count(*) FROM ${table} WHERE deleted_at IS NULL GROUP BY org_id, is_active`);
    const add = (row: 'NEW') =>
      `INSERT INTO master_live_counts (tbl, org_id, is_active, live) SELECT '${table}', ${row}.org_id, ${row}.is_active, 1 WHERE ${row}.deleted_at IS NULL
         ON CONFLICT (tbl, org_id, is_active) DO UPDATE SET live = live + 1;`;
    const remove = (row: 'OLD') =>
      `UPDATE master_live_counts SET live = live - 1
         WHERE ${row}.deleted_at IS NULL AND tbl = '${table}' AND org_id = ${row}.org_id AND is_active = ${row}.is_active;`;
    await knex.raw(`CREATE TRIGGER ${table}_live_count_insert AFTER INSERT ON ${table} BEGIN ${add('NEW')} END`);
    await knex.raw(`CREATE TRIGGER ${table}_live_count_delete AFTER DELETE ON ${table} BEGIN ${remove('OLD')} END`);
    await knex.raw(`
      CREATE TRIGGER ${table}_live_count_update AFTER UPDATE OF deleted_at, is_active, org_id ON ${table}
      WHEN (OLD.deleted_at IS NULL) <> (NEW.deleted_at IS NULL) OR OLD.is_active IS NOT NEW.is_active OR OLD.org_id <> NEW.org_id
      BEGIN ${remove('OLD')} ${add('NEW')} END`);
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const table of MASTER_TABLES) {
    for (const event of ['insert', 'delete', 'update']) await knex.raw(`DROP TRIGGER ${table}_live_count_${event}`);
  }
  await knex.raw('DROP TABLE master_live_counts');
  await knex.raw('ALTER TABLE scan_positions DROP COLUMN visit_count');
}
