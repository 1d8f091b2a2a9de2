import type { Knex } from 'knex';

export const name = '002_scans';

/**
 * Scan-derived state of a shard.
 *
 * - scan_positions: one row per scanned asset: its current location (the scan with the greatest
 *   observed_at) and the open visit (the asset's latest history event). The open visit's
 *   last_seen_at and read_count live here, not on its history row, so that a re-read updates one
 *   row; the history row gets the final figures when the visit closes.
 * - scan_history: visits, clustered by (asset_id, event_observed_at) so that a history page is one
 *   range read of the table itself, with no secondary index to maintain on ingest.
 * - scan_events: event ids already applied, per org (re-published messages with a new stream seq).
 * - scan_ingest_state: per stream, the highest stream sequence whose effects are committed here; a
 *   redelivery at or below it is acked without effect.
 * - scan_resolution_epoch: bumped by triggers on every master-data change, so the ingest's
 *   tag/location resolution caches know when to drop their entries.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE scan_positions (
      asset_id INTEGER PRIMARY KEY,
      org_id INTEGER NOT NULL,
      location_id INTEGER NOT NULL,
      last_seen_at INTEGER NOT NULL,
      visit_id INTEGER NOT NULL,
      visit_started_at INTEGER NOT NULL,
      visit_read_count INTEGER NOT NULL
    )`);
  await knex.raw('CREATE INDEX scan_positions_seen ON scan_positions (org_id, last_seen_at, asset_id)');
  await knex.raw('CREATE INDEX scan_positions_location ON scan_positions (org_id, location_id, last_seen_at, asset_id)');
  await knex.raw(`
    CREATE TABLE scan_history (
      asset_id INTEGER NOT NULL,
      event_observed_at INTEGER NOT NULL,
      id INTEGER NOT NULL,
      location_id INTEGER NOT NULL,
      last_seen_at INTEGER NOT NULL,
      read_count INTEGER NOT NULL,
      PRIMARY KEY (asset_id, event_observed_at, id)
    ) WITHOUT ROWID`);
  await knex.raw(`
    CREATE TABLE scan_events (
      org_id INTEGER NOT NULL,
      event_id TEXT NOT NULL,
      PRIMARY KEY (org_id, event_id)
    ) WITHOUT ROWID`);
  await knex.raw(`
    CREATE TABLE scan_ingest_state (
      stream TEXT PRIMARY KEY,
      stream_created TEXT NOT NULL,
      applied_seq INTEGER NOT NULL
    )`);
  await knex.raw('CREATE TABLE scan_resolution_epoch (id INTEGER PRIMARY KEY CHECK (id = 1), epoch INTEGER NOT NULL)');
  await knex.raw('INSERT INTO scan_resolution_epoch (id, epoch) VALUES (1, 0)');
  for (const table of ['assets', 'locations', 'tags']) {
    for (const event of ['INSERT', 'UPDATE', 'DELETE']) {
      await knex.raw(`
        CREATE TRIGGER scan_epoch_${table}_${event.toLowerCase()} AFTER ${event} ON ${table}
        BEGIN UPDATE scan_resolution_epoch SET epoch = epoch + 1 WHERE id = 1; END`);
    }
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['assets', 'locations', 'tags']) {
    for (const event of ['insert', 'update', 'delete']) await knex.raw(`DROP TRIGGER scan_epoch_${table}_${event}`);
  }
  for (const table of ['scan_resolution_epoch', 'scan_ingest_state', 'scan_events', 'scan_history', 'scan_positions'])
    await knex.raw(`DROP TABLE ${table}`);
}
