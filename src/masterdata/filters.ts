import type { Knex } from 'knex';
import { pagingParams, type QuerySpec, type SortTerm } from '../http/query.js';
import type { Shard } from '../shards/shard.js';
import { keptListCount } from './liveCounts.js';
import { TableMemo } from './tableMemo.js';
import { textIndexCount } from './textCounts.js';
import { textIndexQuery, textIndexTable } from './textIndex.js';
import { applyLiveness, likePattern, runList, type Page, type SortColumns } from './list.js';
import type { KeyedTable } from './keys.js';
import { tagsJsonColumn, type TagOwner } from './tags.js';
import { masterColumns, type MasterRow } from './view.js';
import { shardState } from '../shards/state.js';
import { sqlBuilder, type Db } from '../storage/sqlite.js';

/** The list parameters shared by GET /assets and GET /locations. */
export function masterListParams(sortFields: readonly string[], defaultSort: string): QuerySpec {
  return {
    ...pagingParams(sortFields, defaultSort),
    external_key: {
      kind: 'external_key',
      repeatable: true,
      description: 'Any of these keys (repeat the parameter; comma-joined values are rejected).',
    },
    is_active: { kind: 'boolean', description: 'Only rows with this is_active (default: both).' },
    include_deleted: {
      kind: 'boolean',
      default: false,
      description: 'Also return soft-deleted rows (the currently-effective rule still applies).',
    },
    q: {
      kind: 'q',
      description: 'Case-insensitive substring of name, external_key, description or a live tag value; only the first q is honoured.',
    },
  };
}

const LOWER_FUNCTION = 'trackd_lower';

/**
 * Case-insensitive substring test for `q`. SQLite's LIKE folds ASCII letters only, so a q with other
 * characters compares JavaScript-lowercased text instead (a function registered on the reader by
 * `masterPage`, or by `registerLowerFunction` for other queries); plain ASCII keeps LIKE, which needs no
 * call into JavaScript per row.
 */
export function substringMatch(text: string): { sql: (column: string) => string; value: string } {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the whole ASCII range, controls included, is what LIKE folds
  if (/^[\x00-\x7f]*$/.test(text)) return { sql: (column) => `${column} LIKE ? ESCAPE '\\'`, value: likePattern(text) };
  return { sql: (column) => `instr(${LOWER_FUNCTION}(${column}), ?) > 0`, value: text.toLowerCase() };
}

/** Registers the lower function `substringMatch` may name on a connection. */
export function addLowerFunction(db: Db): void {
  db.function(LOWER_FUNCTION, { deterministic: true }, (value: unknown) => (typeof value === 'string' ? value.toLowerCase() : value));
}

/** Registers the lower function on the shard's read connection of this thread, once. */
export const registerLowerFunction = shardState((shard: Shard): true => {
  addLowerFunction(shard.reader);
  return true;
});

/**
 * How `q` finds its rows. `set`: every row tested, tag values through one uncorrelated set of
 * matching owners, built by scanning every live tag of the org. `exists`: a tag lookup per row
 * tested: the cheaper way when the page is found after a short walk. `text`: the rows the text
 * index (textIndex.ts) gives, as they are for an ASCII q, each tested (with a tag lookup) for
 * another q: a count, or a page of a rare match, costs the matches instead of every row; a q the
 * index cannot answer (under 3 code points) falls back to `set`.
 */
export type TagMatch = 'set' | 'exists' | 'text';

/**
 * Applies the shared list filters to a query over `alias`: the liveness rule (temporal always,
 * soft-delete unless include_deleted), external_key any-of, is_active and q.
 */
export function applyMasterFilters(
  q: Knex.QueryBuilder,
  alias: string,
  orgId: number,
  query: Record<string, unknown>,
  now: number,
  tagColumn: TagOwner['column'],
  tagMatch: TagMatch = 'set',
): Knex.QueryBuilder {
  applyLiveness(q, alias, now, query.include_deleted === true);
  const keys = query.external_key as string[] | undefined;
  if (keys !== undefined && keys.length > 0) q.whereIn(`${alias}.external_key`, keys);
  if (typeof query.is_active === 'boolean') q.where(`${alias}.is_active`, query.is_active ? 1 : 0);
  if (typeof query.q === 'string') {
    const match = substringMatch(query.q);
    const indexed = tagMatch === 'text' ? textIndexQuery(query.q) : undefined;
    if (indexed !== undefined) {
      const table = tagColumn === 'asset_id' ? 'assets' : 'locations';
      // CROSS JOIN keeps the candidates outside: given org_id = ?, the planner would rather walk the org and probe them.
      q.from(
        sqlBuilder.raw(`${textIndexTable(table)}(?) AS tm CROSS JOIN ${table} AS ${alias} ON ${alias}.id = tm.rowid`, [indexed.match]),
      );
      if (indexed.exact) return q;
    }
    const tagsPerRow = tagMatch === 'exists' || indexed !== undefined;
    q.where((w) =>
      w
        .whereRaw(match.sql(`${alias}.name`), [match.value])
        .orWhereRaw(match.sql(`${alias}.external_key`), [match.value])
        .orWhereRaw(match.sql(`${alias}.description`), [match.value])
        .orWhereRaw(
          !tagsPerRow
            ? `${alias}.id IN (SELECT tq.${tagColumn} FROM tags tq WHERE tq.org_id = ? AND tq.deleted_at IS NULL AND ${match.sql('tq.value')})`
            : `EXISTS (SELECT 1 FROM tags tq WHERE tq.${tagColumn} = ${alias}.id AND +tq.org_id = ? AND tq.deleted_at IS NULL AND ${match.sql('tq.value')})`,
          [orgId, match.value],
        ),
    );
  }
  return q;
}

/**
 * Runs a master-data list and maps it to the list envelope. `base` is the filtered query (orgQuery +
 * applyMasterFilters + endpoint filters). Two steps: the sorted page of ids (plus total_count), then
 * the full rows with their tags for just those ids. Selecting everything in the sorted query would
 * build every row's tags and payload before the sort and OFFSET throw most of them away.
 */
export function masterPage<Row extends MasterRow, View>(
  shard: Shard,
  build: (tagMatch: TagMatch) => Knex.QueryBuilder,
  options: {
    table: KeyedTable;
    alias: string;
    orgId: number;
    tagColumn: TagOwner['column'];
    query: Record<string, unknown>;
    columns: SortColumns;
    extraSelect?: string[];
    toView: (row: Row) => View;
    /** The time the liveness rule was applied at. */
    now: number;
    /** Sort fields an index walks in order (a page under another sort tests every row). */
    indexedSorts: readonly string[];
  },
): Page<View> {
  const { alias, query } = options;
  const { limit, offset, sort, ...filters } = query;
  registerLowerFunction(shard);
  const counts = TableMemo.of<number>(shard, `${options.table}.counts`, options.table, 10_000);
  // The page walks rows in sort order until offset + limit of the total matches are found: a fraction
  // (offset + limit) / total of the rows. Under an eighth, a tag lookup per walked row beats a scan of every tag.
  const walks = (sort as SortTerm[]).every((term) => options.indexedSorts.includes(term.field));
  const shortWalk = (total: number) => typeof query.q === 'string' && walks && total > 8 * ((offset as number) + (limit as number));
  const base = build('text');
  const { rows: page, total } = runList<{ id: number }>(shard.readerStatements, base, {
    sort: sort as SortTerm[],
    columns: options.columns,
    idColumn: `${alias}.id`,
    limit: limit as number,
    offset: offset as number,
    select: [`${alias}.id`],
    // Soft-deleted rows' validity boundaries are not tracked (TableMemo): include_deleted lists count each time.
    count: (compute) =>
      filters.include_deleted === true
        ? compute()
        : counts.get(
            `${options.orgId} ${JSON.stringify(filters)}`,
            options.now,
            () =>
              keptListCount(shard, options.table, options.orgId, filters, options.now) ??
              textIndexCount(shard, options.table, options.orgId, filters, options.now) ??
              compute(),
          ),
    pageBase: (total) => (shortWalk(total) ? build('exists') : base),
  });
  if (page.length === 0) return { data: [], limit: limit as number, offset: offset as number, total_count: total };
  const sql =
    `SELECT ${[...masterColumns(alias), ...(options.extraSelect ?? [])].join(', ')}, ${tagsJsonColumn(alias, options.tagColumn)} ` +
    `FROM ${options.table} ${alias} WHERE ${alias}.id IN (SELECT value FROM json_each(?)) AND +${alias}.org_id = ?`;
  const rows = shard.readerStatements.get(sql).all(JSON.stringify(page.map((r) => r.id)), options.orgId) as Row[];
  const byId = new Map(rows.map((row) => [row.id, row]));
  return { data: page.map((r) => options.toView(byId.get(r.id)!)), limit: limit as number, offset: offset as number, total_count: total };
}
