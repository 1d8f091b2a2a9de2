import type { Knex } from 'knex';
import type { SortTerm } from '../http/query.js';
import { sqlBuilder, type StatementCache } from '../storage/sqlite.js';

export interface Page<T> {
  data: T[];
  limit: number;
  offset: number;
  total_count: number;
}

/** Columns a sort field maps to (e.g. `asset_last_seen` -> `c.observed_at`). */
export type SortColumns = Record<string, string>;

/**
 * Runs a knex-built list query through cached better-sqlite3 statements: one statement for the
 * page (with the endpoint's sort, then `id` as the tiebreak) and one for total_count.
 */
export function runList<Row>(
  statements: StatementCache,
  base: Knex.QueryBuilder,
  options: {
    sort: SortTerm[];
    columns: SortColumns;
    idColumn: string;
    limit: number;
    offset: number;
    select: string[];
    /** Answers total_count, calling `compute` only when it has no current answer of its own. */
    count?: (compute: () => number) => number;
    /** The query to page from, chosen knowing the total (default: `base`). */
    pageBase?: (total: number) => Knex.QueryBuilder;
    /**
     * 'follow': the id tiebreak takes the direction of the last sort term, so that a primary key
     * ending in (sort column, id) serves a descending page whole (with id ascending under a
     * descending sort SQLite sorts every tie group it walks: 30 ms instead of 3 at offset 99,950).
     */
    tiebreak?: 'asc' | 'follow';
    /**
     * A page past the middle is read from the other end (every term and the tiebreak reversed, then
     * the rows reversed back): OFFSET walks min(offset, total - offset) rows instead of offset.
     * Only for queries whose order is total (the id tiebreak makes it so) and whose total is exact.
     */
    fromNearerEnd?: boolean;
  },
): { rows: Row[]; total: number } {
  const compute = () => {
    const counted = base.clone().clearSelect().clearOrder().count({ n: '*' }).toSQL().toNative();
    return (statements.get(counted.sql).get(...(counted.bindings as unknown[])) as { n: number }).n;
  };
  const total = options.count ? options.count(compute) : compute();
  if (options.offset >= total) return { rows: [], total };
  const page = (options.pageBase?.(total) ?? base).clone().select(options.select);
  const end = Math.min(total, options.offset + options.limit);
  const reversed = options.fromNearerEnd === true && total - end < options.offset;
  const direction = (desc: boolean) => (desc !== reversed ? 'desc' : 'asc');
  for (const term of options.sort) {
    const column = options.columns[term.field];
    // The sort parser admits only the route's sort fields, each of which has a column.
    if (column === undefined) throw new Error(`no column for sort field ${term.field}`);
    page.orderBy(column, direction(term.desc));
  }
  const idDesc = options.tiebreak === 'follow' && options.sort.at(-1)?.desc === true;
  page
    .orderBy(options.idColumn, direction(idDesc))
    .limit(reversed ? end - options.offset : options.limit)
    .offset(reversed ? total - end : options.offset);
  const native = page.toSQL().toNative();
  const rows = statements.get(native.sql).all(...(native.bindings as unknown[])) as Row[];
  return { rows: reversed ? rows.reverse() : rows, total };
}

/** Starts a list query over `table` as `alias`, scoped to one organization (no query can cross orgs). */
export function orgQuery(table: string, alias: string, orgId: number, walkTable = false): Knex.QueryBuilder {
  // NOT INDEXED: the table in rowid order, the other orgs' rows skipped (an export of an org that is most of its shard).
  const from = walkTable ? sqlBuilder.from(sqlBuilder.raw(`${table} AS ${alias} NOT INDEXED`)) : sqlBuilder(`${table} as ${alias}`);
  return from.where(`${alias}.org_id`, orgId);
}

/** The default list scope: the currently-effective rule always; soft-deleted rows unless asked for. */
export function applyLiveness(q: Knex.QueryBuilder, alias: string, now: number, includeDeleted: boolean): Knex.QueryBuilder {
  // Unary + keeps valid_from (true for nearly every row) from steering the planner onto a range scan:
  // an index matching the ORDER BY then serves the page and stops at offset + limit.
  q.whereRaw(`+${alias}.valid_from <= ?`, [now]).andWhere((w) => w.whereNull(`${alias}.valid_to`).orWhere(`${alias}.valid_to`, '>', now));
  if (!includeDeleted) q.whereNull(`${alias}.deleted_at`);
  return q;
}

/** Escapes a user substring for LIKE ... ESCAPE '\\' (case-insensitive for ASCII in SQLite). */
export function likePattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}
