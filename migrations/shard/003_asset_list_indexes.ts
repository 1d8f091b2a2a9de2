import type { Knex } from 'knex';

export const name = '003_asset_list_indexes';

/**
 * Indexes for the asset list over live rows (the default scope). Each carries the temporal columns and
 * is_active, so total_count and the sorted page of ids are answered from the index alone, and a sort
 * by name / created_at / updated_at walks an index and stops at offset + limit instead of sorting
 * every row of the organization. Measured on 10,000 assets: -updated_at page 26 ms -> see notes/assets.md.
 */
const COVERED = 'valid_from, valid_to, is_active';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE INDEX assets_live_window ON assets (org_id, ${COVERED}) WHERE deleted_at IS NULL`);
  for (const column of ['name', 'created_at', 'updated_at']) {
    await knex.raw(`CREATE INDEX assets_live_${column} ON assets (org_id, ${column}, id, ${COVERED}) WHERE deleted_at IS NULL`);
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const index of ['assets_live_window', 'assets_live_name', 'assets_live_created_at', 'assets_live_updated_at'])
    await knex.raw(`DROP INDEX ${index}`);
}
