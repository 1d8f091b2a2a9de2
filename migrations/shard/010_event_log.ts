import type { Knex } from 'knex';

export const name = '010_event_log';

/**
 * The event log (src/events/log.ts): what each committed change of a shard implies for integrators,
 * written in the change's own transaction.
 *
 * - events: one row per event. `pos` is the shard-wide commit order (AUTOINCREMENT, so a position is
 *   never handed out twice even after the oldest rows are pruned): the relay publishes in that order
 *   and remembers the last position it published. `seq` is the organization's own sequence, gapless
 *   in commit order; `data` the event's payload as JSON.
 * - event_heads: per organization, the last sequence handed out (kept when its events are pruned, so
 *   the sequence never restarts).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE events (
      pos INTEGER PRIMARY KEY AUTOINCREMENT,
      org_id INTEGER NOT NULL,
      seq INTEGER NOT NULL,
      id TEXT NOT NULL,
      type TEXT NOT NULL,
      occurred_at INTEGER NOT NULL,
      data TEXT NOT NULL
    )`);
  await knex.raw('CREATE UNIQUE INDEX events_org_seq ON events (org_id, seq)');
  await knex.raw('CREATE TABLE event_heads (org_id INTEGER PRIMARY KEY, last_seq INTEGER NOT NULL)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE event_heads');
  await knex.raw('DROP TABLE events');
}
