import type { Knex } from 'knex';

export const name = '009_report_order_in_memory';

/**
 * The report's -asset_last_seen order lives in the shard actor's report index (src/scans/reportIndex.ts),
 * so no SQLite index keeps last_seen_at any more: with it in two indexes a re-read of a parked tag
 * moved one entry and rewrote another, three random pages per read where the field workload reads a
 * million parked tags (measured on a copy of the 1,000,000-asset shard: 100,000 re-reads in batches
 * of 20,000, 15,300/s with both indexes, 30,900/s with neither). Requests the index does not serve
 * (include_deleted, q, asset filters, other sorts) sort their matching rows. The location index
 * stays for location filters and the delete rule (placement.ts), without last_seen_at, so a re-read
 * (which writes last_seen_at and the visit's read count only) leaves it alone.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX scan_positions_seen');
  await knex.raw('DROP INDEX scan_positions_location');
  await knex.raw(
    'CREATE INDEX scan_positions_location ON scan_positions (org_id, location_id, asset_id, asset_deleted_at, asset_valid_from, asset_valid_to)',
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX scan_positions_location');
  await knex.raw(
    'CREATE INDEX scan_positions_seen ON scan_positions (org_id, last_seen_at, asset_id, asset_deleted_at, asset_valid_from, asset_valid_to)',
  );
  await knex.raw(
    'CREATE INDEX scan_positions_location ON scan_positions (org_id, location_id, asset_id, last_seen_at, asset_deleted_at, asset_valid_from, asset_valid_to)',
  );
}
