import type { Knex } from 'knex';

export const name = '016_text_index_deferrable';

const OWNERS = [
  { table: 'assets', column: 'asset_id' },
  { table: 'locations', column: 'location_id' },
] as const;

const EVENTS = ['insert', 'update', 'delete', 'tag_insert', 'tag_update', 'tag_delete'] as const;

/**
 * The q text index (migration 013) kept per batch instead of per row, for bulk imports (issue 16):
 * its triggers were about three quarters of the CPU of inserting an asset with a tag.
 *
 * - text_index_paused: holds a row only inside a bulk batch's transaction (the batch inserts it
 *   first and deletes it before it ends), so no other writer and no reader ever sees one.
 * - text_index_stale: the owners whose index row a paused trigger did not rewrite; the batch
 *   rewrites them all at its end in two set-based statements and empties it. `inserted`: the
 *   owner's first mark in the batch was its own insert, so it had no index row before (ids are
 *   never reused, and a delete earlier in the batch would have marked it first): the rewrite
 *   skips deleting its old row (an FTS5 delete of a rowid it lacks still costs several us).
 * - <table>_text_source: the index row of each owner (the body of migration 013), used by the
 *   triggers and by that batch rewrite alike, so both write the same text.
 *
 * Each trigger of migration 013 is recreated as it was, with `NOT EXISTS text_index_paused` added
 * to its condition, beside a twin under `EXISTS text_index_paused` that only marks the owners it
 * would have rewritten. The index row of an owner is a function of the owner's current data (every
 * trigger rewrites it from that), so rewriting the marked owners once at the batch's end leaves
 * exactly the index the row-by-row triggers would have.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE TABLE text_index_paused (paused INTEGER NOT NULL)');
  await knex.raw(
    'CREATE TABLE text_index_stale (owner TEXT NOT NULL, id INTEGER NOT NULL, inserted INTEGER NOT NULL, PRIMARY KEY (owner, id)) WITHOUT ROWID',
  );
  const running = 'NOT EXISTS (SELECT 1 FROM text_index_paused)';
  const paused = 'EXISTS (SELECT 1 FROM text_index_paused)';
  for (const { table, column } of OWNERS) {
    const text = `${table}_text`;
    const body = (row: string) =>
      'replace(replace(' +
      `${row}.name || char(1) || ${row}.external_key || char(1) || coalesce(${row}.description, '') || ` +
      `coalesce((SELECT char(1) || group_concat(t.value, char(1)) FROM tags t WHERE t.${column} = ${row}.id AND t.deleted_at IS NULL), '')` +
      ', char(383), char(65533)), char(8490), char(65533))';
    /** Rewrites the index row of the owner `id` (an SQL expression; NULL touches nothing). */
    const refresh = (id: string) =>
      `DELETE FROM ${text} WHERE rowid = ${id};
       INSERT INTO ${text} (rowid, body) SELECT o.id, ${body('o')} FROM ${table} o WHERE o.id = ${id};`;
    /** Marks the owner `id` for the batch's rewrite (NULL marks nothing); the first mark of an owner in a batch stays. */
    const mark = (id: string, inserted = 0) =>
      `INSERT OR IGNORE INTO text_index_stale (owner, id, inserted) SELECT '${table}', ${id}, ${inserted} WHERE ${id} IS NOT NULL;`;
    await knex.raw(`CREATE VIEW ${text}_source AS SELECT o.id AS id, ${body('o')} AS body FROM ${table} o`);
    for (const event of EVENTS) await knex.raw(`DROP TRIGGER ${text}_${event}`);
    const tagUpdated = `(OLD.${column} IS NOT NULL OR NEW.${column} IS NOT NULL)
        AND (OLD.value IS NOT NEW.value OR OLD.deleted_at IS NOT NEW.deleted_at OR OLD.${column} IS NOT NEW.${column})`;
    const ownerUpdated = 'OLD.name IS NOT NEW.name OR OLD.external_key IS NOT NEW.external_key OR OLD.description IS NOT NEW.description';
    const newTarget = `CASE WHEN NEW.${column} IS NOT OLD.${column} THEN NEW.${column} END`;
    const triggers: { event: (typeof EVENTS)[number]; on: string; when: string; now: string; later: string }[] = [
      {
        event: 'insert',
        on: `AFTER INSERT ON ${table}`,
        when: '1',
        now: `INSERT INTO ${text} (rowid, body) VALUES (NEW.id, ${body('NEW')});`,
        later: mark('NEW.id', 1),
      },
      {
        event: 'update',
        on: `AFTER UPDATE OF name, external_key, description ON ${table}`,
        when: `(${ownerUpdated})`,
        now: refresh('NEW.id'),
        later: mark('NEW.id'),
      },
      {
        event: 'delete',
        on: `AFTER DELETE ON ${table}`,
        when: '1',
        now: `DELETE FROM ${text} WHERE rowid = OLD.id;`,
        later: mark('OLD.id'),
      },
      {
        event: 'tag_insert',
        on: 'AFTER INSERT ON tags',
        when: `NEW.${column} IS NOT NULL AND NEW.deleted_at IS NULL`,
        now: refresh(`NEW.${column}`),
        later: mark(`NEW.${column}`),
      },
      {
        event: 'tag_update',
        on: `AFTER UPDATE OF value, deleted_at, ${column} ON tags`,
        when: `(${tagUpdated})`,
        now: `${refresh(`OLD.${column}`)} ${refresh(newTarget)}`,
        later: `${mark(`OLD.${column}`)} ${mark(newTarget)}`,
      },
      {
        event: 'tag_delete',
        on: 'AFTER DELETE ON tags',
        when: `OLD.${column} IS NOT NULL AND OLD.deleted_at IS NULL`,
        now: refresh(`OLD.${column}`),
        later: mark(`OLD.${column}`),
      },
    ];
    for (const { event, on, when, now, later } of triggers) {
      await knex.raw(`CREATE TRIGGER ${text}_${event} ${on} WHEN ${when} AND ${running} BEGIN ${now} END`);
      await knex.raw(`CREATE TRIGGER ${text}_${event}_paused ${on} WHEN ${when} AND ${paused} BEGIN ${later} END`);
    }
  }
}
