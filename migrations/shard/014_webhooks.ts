import type { Knex } from 'knex';

export const name = '014_webhooks';

/**
 * Webhooks (src/webhooks/): endpoints an organization registered, their delivery cursors and their
 * delivery log. Everything here is written by recorded shard commands (an endpoint's settings from
 * the API, the dispatcher's progress with the attempt's outcome as arguments), so a replay or a
 * journal rebuild carries the cursors along with the shard.
 *
 * - webhooks: one row per endpoint. `secrets` holds the signing secrets encrypted (JSON list, newest
 *   first, each with the time it stops being used; never the plain secret). `cursor` is the last
 *   sequence of the org's event log handled (delivered with a 2xx, or not matching the filters);
 *   `cursor_epoch` counts the API's moves of it (replay), so that the dispatcher's progress for an
 *   older cursor is not written over a replay. `failing_since`/`attempts` describe the current run
 *   of failed attempts of the event after the cursor; `status` is `active` or `paused`.
 * - webhook_deliveries: every attempt (status, latency, response excerpt), kept per endpoint up to a
 *   bound (the oldest dropped).
 * - webhook_requests: one-off sends asked for by the API (a test event, a redelivery) that the
 *   dispatcher has not made yet.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE webhooks (
      id INTEGER PRIMARY KEY,
      org_id INTEGER NOT NULL,
      url TEXT NOT NULL,
      description TEXT,
      event_types TEXT NOT NULL,
      filters TEXT NOT NULL,
      scopes TEXT NOT NULL,
      secrets TEXT NOT NULL,
      status TEXT NOT NULL,
      paused_reason TEXT,
      cursor INTEGER NOT NULL,
      cursor_epoch INTEGER NOT NULL DEFAULT 0,
      failing_since INTEGER,
      attempts INTEGER NOT NULL DEFAULT 0,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL
    )`);
  await knex.raw('CREATE INDEX webhooks_org ON webhooks (org_id, id)');
  await knex.raw(`
    CREATE TABLE webhook_deliveries (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      webhook_id INTEGER NOT NULL,
      kind TEXT NOT NULL,
      message_id TEXT NOT NULL,
      event_seq INTEGER,
      event_type TEXT NOT NULL,
      attempt INTEGER NOT NULL,
      attempted_at INTEGER NOT NULL,
      status INTEGER,
      error TEXT,
      latency_ms INTEGER NOT NULL,
      response_excerpt TEXT
    )`);
  await knex.raw('CREATE INDEX webhook_deliveries_by_hook ON webhook_deliveries (webhook_id, id)');
  await knex.raw(`
    CREATE TABLE webhook_requests (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      webhook_id INTEGER NOT NULL,
      kind TEXT NOT NULL,
      message_id TEXT NOT NULL,
      event_seq INTEGER,
      created_at INTEGER NOT NULL
    )`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE webhook_requests');
  await knex.raw('DROP TABLE webhook_deliveries');
  await knex.raw('DROP TABLE webhooks');
}
