import type { Knex } from 'knex';

export const name = '004_location_tree';

/**
 * A covering index for the location tree walks: each step of a recursive descent reads the live
 * children of a node (id plus the validity window the tree lists filter on) from the index alone,
 * without a table lookup per node.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE INDEX locations_tree ON locations (org_id, parent_id, id, valid_from, valid_to) WHERE deleted_at IS NULL');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX locations_tree');
}
