import type { Knex } from 'knex';

export const name = '021_report_asset_key';

/**
 * A report page reads its rows by asset id; the asset's external_key was the only column it still
 * joined assets for (deleted_at is copied since 005). At 1,000,000 assets that lookup was about 40%
 * of a page's SQLite time (a page of 50 rows: 210 us with it, 132 us with the copy; a separate
 * table of keys by asset id, 179-210 us), so the key is copied onto the position, kept in step by a
 * trigger like the liveness. Its cost: the field workload's batches write about 6% more WAL frames
 * (14,700 against 13,850 per 100,000 reads), the positions' pages being that much fuller.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw("ALTER TABLE scan_positions ADD COLUMN asset_external_key TEXT NOT NULL DEFAULT ''");
  await knex.raw(`UPDATE scan_positions SET asset_external_key = a.external_key FROM assets a WHERE a.id = scan_positions.asset_id`);
  await knex.raw(`
    CREATE TRIGGER scan_positions_asset_key AFTER UPDATE OF external_key ON assets
    BEGIN
      UPDATE scan_positions SET asset_external_key = NEW.external_key WHERE asset_id = NEW.id;
    END`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TRIGGER scan_positions_asset_key');
  await knex.raw('ALTER TABLE scan_positions DROP COLUMN asset_external_key');
}
