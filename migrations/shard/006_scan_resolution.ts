import type { Knex } from 'knex';

export const name = '006_scan_resolution';

/**
 * The ingest's resolution caches (tag -> asset, location ref -> location) are dropped only by
 * changes that can alter a resolution: `epoch` counts changes (a tag updated or deleted, an asset
 * or location soft-deleted, a location re-keyed), which drop every cached entry; `additions`
 * counts new tags and locations, which drop only the cached misses. Asset PATCHes and creates
 * without tags leave the caches alone.
 */
export async function up(knex: Knex): Promise<void> {
  for (const table of ['assets', 'locations', 'tags']) {
    for (const event of ['insert', 'update', 'delete']) await knex.raw(`DROP TRIGGER scan_epoch_${table}_${event}`);
  }
  await knex.raw('ALTER TABLE scan_resolution_epoch ADD COLUMN additions INTEGER NOT NULL DEFAULT 0');
  const bump = (column: string) => `BEGIN UPDATE scan_resolution_epoch SET ${column} = ${column} + 1 WHERE id = 1; END`;
  await knex.raw(`CREATE TRIGGER scan_epoch_tags_insert AFTER INSERT ON tags ${bump('additions')}`);
  await knex.raw(`CREATE TRIGGER scan_epoch_tags_update AFTER UPDATE ON tags ${bump('epoch')}`);
  await knex.raw(`CREATE TRIGGER scan_epoch_tags_delete AFTER DELETE ON tags ${bump('epoch')}`);
  await knex.raw(`CREATE TRIGGER scan_epoch_assets_update AFTER UPDATE OF deleted_at ON assets ${bump('epoch')}`);
  await knex.raw(`CREATE TRIGGER scan_epoch_assets_delete AFTER DELETE ON assets ${bump('epoch')}`);
  await knex.raw(`CREATE TRIGGER scan_epoch_locations_insert AFTER INSERT ON locations ${bump('additions')}`);
  await knex.raw(
    `CREATE TRIGGER scan_epoch_locations_update AFTER UPDATE OF deleted_at, external_key, org_id ON locations ${bump('epoch')}`,
  );
  await knex.raw(`CREATE TRIGGER scan_epoch_locations_delete AFTER DELETE ON locations ${bump('epoch')}`);
}

export async function down(knex: Knex): Promise<void> {
  for (const trigger of [
    'tags_insert',
    'tags_update',
    'tags_delete',
    'assets_update',
    'assets_delete',
    'locations_insert',
    'locations_update',
    'locations_delete',
  ]) {
    await knex.raw(`DROP TRIGGER scan_epoch_${trigger}`);
  }
}
