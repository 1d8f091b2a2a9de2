import type { Knex } from 'knex';

export const name = '020_location_members_in_memory';

/**
 * Which positions are at a location comes from the shard actor's report index
 * (src/scans/reportIndex.ts `locationMembers`), no longer from a SQLite index: every move of an asset
 * deleted its entry in scan_positions_location under the old location and inserted one under the
 * new, two random pages of 7,094 at 1,000,000 positions, and a 100,000-read field batch (5,000 moves)
 * dirtied three quarters of them (docs/field-rereads.md, "The location index leaves SQLite"). The
 * organization index that replaces it as the scope of every query by org changes only when a
 * position is first written or removed.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS scan_positions_location');
  await knex.raw('CREATE INDEX IF NOT EXISTS scan_positions_org ON scan_positions (org_id)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS scan_positions_org');
  await knex.raw(
    'CREATE INDEX scan_positions_location ON scan_positions (org_id, location_id, asset_id, asset_deleted_at, asset_valid_from, asset_valid_to)',
  );
}
