import type { Shard } from '../shards/shard.js';
import type { KeyedTable } from './keys.js';

/** A list's filters that narrow it: not unset, and not `include_deleted=false` (the default scope). */
export const setFilters = (filters: Record<string, unknown>): [string, unknown][] =>
  Object.entries(filters).filter(([name, value]) => value !== undefined && !(name === 'include_deleted' && value === false));

/**
 * total_count of a master-data list whose only filters are the default scope and is_active, from
 * the counts triggers keep (master_live_counts, migration 012): the rows not soft-deleted, less
 * those outside their validity window now (not yet effective, or expired), each a range of a
 * valid_from / valid_to index (migration 008) rather than a walk of every live row. Undefined for
 * any other filter set (q, keys, include_deleted, an endpoint's own filters): those count rows.
 */
export function keptListCount(
  shard: Shard,
  table: KeyedTable,
  orgId: number,
  filters: Record<string, unknown>,
  now: number,
): number | undefined {
  let active: number | null = null;
  for (const [name, value] of setFilters(filters)) {
    if (name === 'is_active' && typeof value === 'boolean') active = value ? 1 : 0;
    else return undefined;
  }
  const statements = shard.readerStatements;
  const scope = 'org_id = @org AND (@active IS NULL OR is_active = @active)';
  const args = { table, org: orgId, active, now };
  // One snapshot for the three reads: a write between them could count a row twice or not at all.
  return shard.reader.transaction(
    () =>
      (statements
        .get(`SELECT coalesce(sum(live), 0) FROM master_live_counts WHERE tbl = @table AND ${scope}`)
        .pluck()
        .get(args) as number) -
      (statements
        .get(
          `SELECT count(*) FROM ${table} INDEXED BY ${table}_live_valid_from WHERE deleted_at IS NULL AND valid_from > @now AND ${scope}`,
        )
        .pluck()
        .get(args) as number) -
      (statements
        .get(`SELECT count(*) FROM ${table} INDEXED BY ${table}_live_valid_to WHERE deleted_at IS NULL AND valid_to <= @now AND ${scope}`)
        .pluck()
        .get(args) as number),
  )();
}
