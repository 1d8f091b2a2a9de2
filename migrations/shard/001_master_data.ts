import type { Knex } from 'knex';

export const name = '001_master_data';

/**
 * Master data of every organization in one shard. Ids are assigned by the shard from control-plane
 * id blocks (unique per entity type across shards). Times are integer milliseconds since the epoch.
 * Uniqueness of external keys and tag natural keys holds among live rows only (partial indexes).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE assets (
      id INTEGER PRIMARY KEY,
      org_id INTEGER NOT NULL,
      external_key TEXT NOT NULL,
      name TEXT NOT NULL,
      description TEXT,
      is_active INTEGER NOT NULL DEFAULT 1,
      metadata TEXT NOT NULL DEFAULT '{}',
      valid_from INTEGER NOT NULL,
      valid_to INTEGER,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL,
      deleted_at INTEGER
    )`);
  await knex.raw('CREATE UNIQUE INDEX assets_live_key ON assets (org_id, external_key) WHERE deleted_at IS NULL');
  await knex.raw('CREATE INDEX assets_org_key ON assets (org_id, external_key, id)');
  await knex.raw(`
    CREATE TABLE locations (
      id INTEGER PRIMARY KEY,
      org_id INTEGER NOT NULL,
      external_key TEXT NOT NULL,
      name TEXT NOT NULL,
      description TEXT,
      parent_id INTEGER,
      is_active INTEGER NOT NULL DEFAULT 1,
      valid_from INTEGER NOT NULL,
      valid_to INTEGER,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL,
      deleted_at INTEGER
    )`);
  await knex.raw('CREATE UNIQUE INDEX locations_live_key ON locations (org_id, external_key) WHERE deleted_at IS NULL');
  await knex.raw('CREATE INDEX locations_org_key ON locations (org_id, external_key, id)');
  await knex.raw('CREATE INDEX locations_parent ON locations (org_id, parent_id, name, id)');
  await knex.raw(`
    CREATE TABLE tags (
      id INTEGER PRIMARY KEY,
      org_id INTEGER NOT NULL,
      tag_type TEXT NOT NULL,
      value TEXT NOT NULL,
      asset_id INTEGER,
      location_id INTEGER,
      created_at INTEGER NOT NULL,
      deleted_at INTEGER
    )`);
  await knex.raw('CREATE UNIQUE INDEX tags_live_natural_key ON tags (org_id, tag_type, value) WHERE deleted_at IS NULL');
  await knex.raw('CREATE INDEX tags_asset ON tags (asset_id, id) WHERE asset_id IS NOT NULL');
  await knex.raw('CREATE INDEX tags_location ON tags (location_id, id) WHERE location_id IS NOT NULL');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE tags');
  await knex.raw('DROP TABLE locations');
  await knex.raw('DROP TABLE assets');
}
