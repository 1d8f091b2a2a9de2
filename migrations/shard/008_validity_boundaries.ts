import type { Knex } from 'knex';

export const name = '008_validity_boundaries';

/**
 * The next valid_from / valid_to after now among live rows, as one index seek each: list counts
 * are cached until that moment (src/masterdata/countCache.ts).
 */
const INDEXES = [
  'assets_live_valid_from ON assets (valid_from)',
  'assets_live_valid_to ON assets (valid_to)',
  'locations_live_valid_from ON locations (valid_from)',
  'locations_live_valid_to ON locations (valid_to)',
];

export async function up(knex: Knex): Promise<void> {
  for (const index of INDEXES) await knex.raw(`CREATE INDEX ${index} WHERE deleted_at IS NULL`);
}

export async function down(knex: Knex): Promise<void> {
  for (const index of INDEXES) await knex.raw(`DROP INDEX ${index.split(' ')[0]}`);
}
