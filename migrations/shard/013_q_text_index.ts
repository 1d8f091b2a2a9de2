import type { Knex } from 'knex';

export const name = '013_q_text_index';

const OWNERS = [
  { table: 'assets', column: 'asset_id' },
  { table: 'locations', column: 'location_id' },
] as const;

/**
 * The text index of the lists' `q` (issue 13; src/masterdata/textIndex.ts says why it never misses
 * a match): per table an FTS5 table of trigrams, contentless (the rows are in the table itself),
 * one row per owner whatever its state (include_deleted lists search soft-deleted rows too), rowid =
 * the owner's id, holding name, external key, description and the live tag values, each after a
 * char(1) (q rejects control characters, so no q spans two fields). U+017F and U+212A, the two
 * code points beyond ASCII that the trigram fold makes ASCII ("s", "k"), are indexed as U+FFFD: so
 * a phrase of an ASCII q matches exactly the rows whose LIKE matches, and needs no test after it.
 * detail=full (positions) for the phrase. Triggers keep it, whichever connection writes (the
 * writer, bulk imports, the bench loader).
 */
export async function up(knex: Knex): Promise<void> {
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
    await knex.raw(
      `CREATE VIRTUAL TABLE ${text} USING fts5(body, tokenize = 'trigram', content = '', contentless_delete = 1, detail = 'full')`,
    );
    await knex.raw(`INSERT INTO ${text} (rowid, body) SELECT o.id, ${body('o')} FROM ${table} o`);
    await knex.raw(`CREATE TRIGGER ${text}_insert AFTER INSERT ON ${table} BEGIN
      INSERT INTO ${text} (rowid, body) VALUES (NEW.id, ${body('NEW')}); END`);
    await knex.raw(`CREATE TRIGGER ${text}_update AFTER UPDATE OF name, external_key, description ON ${table}
      WHEN OLD.name IS NOT NEW.name OR OLD.external_key IS NOT NEW.external_key OR OLD.description IS NOT NEW.description
      BEGIN ${refresh('NEW.id')} END`);
    await knex.raw(`CREATE TRIGGER ${text}_delete AFTER DELETE ON ${table} BEGIN DELETE FROM ${text} WHERE rowid = OLD.id; END`);
    await knex.raw(`CREATE TRIGGER ${text}_tag_insert AFTER INSERT ON tags WHEN NEW.${column} IS NOT NULL AND NEW.deleted_at IS NULL
      BEGIN ${refresh(`NEW.${column}`)} END`);
    await knex.raw(`CREATE TRIGGER ${text}_tag_update AFTER UPDATE OF value, deleted_at, ${column} ON tags
      WHEN (OLD.${column} IS NOT NULL OR NEW.${column} IS NOT NULL)
        AND (OLD.value IS NOT NEW.value OR OLD.deleted_at IS NOT NEW.deleted_at OR OLD.${column} IS NOT NEW.${column})
      BEGIN ${refresh(`OLD.${column}`)} ${refresh(`CASE WHEN NEW.${column} IS NOT OLD.${column} THEN NEW.${column} END`)} END`);
    await knex.raw(`CREATE TRIGGER ${text}_tag_delete AFTER DELETE ON tags WHEN OLD.${column} IS NOT NULL AND OLD.deleted_at IS NULL
      BEGIN ${refresh(`OLD.${column}`)} END`);
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const { table } of OWNERS) {
    for (const event of ['insert', 'update', 'delete', 'tag_insert', 'tag_update', 'tag_delete']) {
      await knex.raw(`DROP TRIGGER ${table}_text_${event}`);
    }
    await knex.raw(`DROP TABLE ${table}_text`);
  }
}
