import type { Knex } from 'knex';

export const name = '003_users_and_sessions';

/**
 * People of the web console: users (scrypt password hashes), the organizations each belongs to,
 * web sessions (so that logout and expiry hold on the server, not only in the cookie), and failed
 * login attempts (the login rate limit, shared by every HTTP thread and process over this file).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('users', (t) => {
    t.increments('id').primary();
    t.string('email', 254).notNullable().unique();
    t.text('password_hash').notNullable();
    t.bigInteger('created_at').notNullable();
  });
  await knex.schema.createTable('user_orgs', (t) => {
    t.integer('user_id').notNullable();
    t.integer('org_id').notNullable();
    t.primary(['user_id', 'org_id']);
  });
  await knex.schema.createTable('web_sessions', (t) => {
    t.string('id', 36).primary();
    t.integer('user_id').notNullable();
    t.integer('org_id').notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('expires_at').notNullable();
    t.bigInteger('revoked_at').nullable();
  });
  await knex.schema.createTable('login_failures', (t) => {
    t.string('subject', 300).notNullable();
    t.bigInteger('at').notNullable();
    t.index(['subject', 'at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('login_failures');
  await knex.schema.dropTable('web_sessions');
  await knex.schema.dropTable('user_orgs');
  await knex.schema.dropTable('users');
}
