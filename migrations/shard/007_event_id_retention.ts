import type { Knex } from 'knex';

export const name = '007_event_id_retention';

/**
 * Event ids are kept for a retention horizon (EVENT_ID_RETENTION_SECONDS) rather than forever, so a
 * parked tag's scans do not grow storage per scan. Rows from before this migration get seen_at 0 and go
 * at the first prune.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE scan_events ADD COLUMN seen_at INTEGER NOT NULL DEFAULT 0');
  await knex.raw('CREATE INDEX scan_events_seen_at ON scan_events (seen_at)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX scan_events_seen_at');
  await knex.raw('ALTER TABLE scan_events DROP COLUMN seen_at');
}
