import type { Knex } from 'knex';

export const name = '004_key_last_used';

/**
 * When an API key was last used, to the minute: written off the request path by each server thread
 * at most once a minute per key (src/auth/keyUse.ts), shown in the console's key list.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('api_keys', (t) => {
    t.bigInteger('last_used_at').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('api_keys', (t) => {
    t.dropColumn('last_used_at');
  });
}
