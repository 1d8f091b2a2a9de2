import type { Shard } from '../shards/shard.js';
import type { KeyedTable } from './keys.js';
import { setFilters } from './liveCounts.js';
import { textIndexQuery, textIndexTable } from './textIndex.js';

/**
 * total_count of a master-data list filtered by an ASCII `q` (and at most `is_active=true`), from
 * the text index without reading the matching rows. The index holds one row per row of the table,
 * whatever its state, and answers an ASCII q exactly (textIndex.ts), so the count is the index's
 * matches less the matches among the rows the list's scope leaves out ("outside"): the other orgs'
 * rows, the org's soft-deleted rows, its live rows outside their validity window now and, for
 * `is_active=true`, its live inactive rows, each a range of an index (migrations 001, 008, 015).
 *
 * Counting the matches row by row costs a table lookup per match (a q in a tenth of 1,000,000
 * names: 100,000 lookups); this costs the index's count, an index step per outside row and a probe
 * of the matches per outside row. It is used while the outside rows are at most half the matches
 * (counted with a LIMIT, so finding out costs at most that many index steps); undefined otherwise,
 * and for any other filter set, where the caller counts row by row.
 */
export function textIndexCount(
  shard: Shard,
  table: KeyedTable,
  orgId: number,
  filters: Record<string, unknown>,
  now: number,
): number | undefined {
  let q: string | undefined;
  let activeOnly = false;
  for (const [name, value] of setFilters(filters)) {
    if (name === 'q' && typeof value === 'string') q = value;
    else if (name === 'is_active' && value === true) activeOnly = true;
    else return undefined;
  }
  const indexed = q === undefined ? undefined : textIndexQuery(q);
  if (indexed === undefined || !indexed.exact) return undefined;
  const text = textIndexTable(table);
  const outside = [
    `SELECT id FROM ${table} INDEXED BY ${table}_org_key WHERE org_id < @org`,
    `SELECT id FROM ${table} INDEXED BY ${table}_org_key WHERE org_id > @org`,
    `SELECT id FROM ${table} INDEXED BY ${table}_deleted WHERE deleted_at IS NOT NULL AND org_id = @org`,
    `SELECT id FROM ${table} INDEXED BY ${table}_live_valid_from WHERE deleted_at IS NULL AND valid_from > @now AND org_id = @org`,
    `SELECT id FROM ${table} INDEXED BY ${table}_live_valid_to WHERE deleted_at IS NULL AND valid_to <= @now AND org_id = @org`,
    ...(activeOnly
      ? [`SELECT id FROM ${table} INDEXED BY ${table}_live_inactive WHERE deleted_at IS NULL AND is_active = 0 AND org_id = @org`]
      : []),
  ];
  const statements = shard.readerStatements;
  // One snapshot for every read: a write between them could count a row twice or not at all.
  return shard.reader.transaction((): number | undefined => {
    const matches = statements.get(`SELECT count(*) FROM ${text}(?)`).pluck().get(indexed.match) as number;
    if (matches === 0) return 0;
    const most = Math.floor(matches / 2);
    let found = 0;
    for (const sql of outside) {
      found += statements
        .get(`SELECT count(*) FROM (${sql} LIMIT @limit)`)
        .pluck()
        .get({ org: orgId, now, limit: most - found + 1 }) as number;
      if (found > most) return undefined;
    }
    if (found === 0) return matches;
    // UNION: an inactive row outside its window is in two of the ranges.
    const matchedOutside = statements
      .get(`SELECT count(*) FROM (${outside.join(' UNION ')}) o WHERE o.id IN (SELECT rowid FROM ${text}(@match))`)
      .pluck()
      .get({ org: orgId, now, match: indexed.match }) as number;
    return matches - matchedOutside;
  })();
}
