import type { Knex } from 'knex';

export const name = '001_orgs_and_keys';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('orgs', (t) => {
    t.increments('id').primary();
    t.string('name', 255).notNullable();
    t.integer('shard').notNullable();
    t.bigInteger('created_at').notNullable();
  });
  await knex.schema.createTable('api_keys', (t) => {
    t.string('id', 36).primary();
    t.integer('org_id').notNullable().index();
    t.string('name', 255).notNullable();
    t.text('scopes').notNullable();
    t.string('env', 16).notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('expires_at').nullable();
    t.bigInteger('revoked_at').nullable().index();
  });
  // Id blocks: shards reserve ranges so ids stay unique per entity type across shards.
  await knex.schema.createTable('id_blocks', (t) => {
    t.string('entity', 32).primary();
    t.bigInteger('next_id').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('id_blocks');
  await knex.schema.dropTable('api_keys');
  await knex.schema.dropTable('orgs');
}
