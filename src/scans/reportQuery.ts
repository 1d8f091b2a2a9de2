import type { Knex } from 'knex';
import { fieldError, throwIfInvalid, type FieldError } from '../errors/catalog.js';
import type { SortTerm } from '../http/query.js';
import { formatNullableTimestamp, formatTimestamp } from '../http/timestamps.js';
import { applyLiveness, likePattern, orgQuery, runList, type Page } from '../masterdata/list.js';
import type { Shard } from '../shards/shard.js';
import { sqlBuilder } from '../storage/sqlite.js';
import type { AssetLocationItem } from './schemas/assetLocationItem.js';

export interface ReportFilters {
  location_id?: number[];
  location_external_key?: string[];
  asset_id?: number[];
  asset_external_key?: string[];
  include_deleted?: boolean;
  q?: string;
  sort: SortTerm[];
  limit: number;
  offset: number;
}

const PAIRS: [string, string][] = [
  ['location_id', 'location_external_key'],
  ['asset_id', 'asset_external_key'],
];

/** Both forms of a paired filter: ambiguous_fields, one entry per parameter, even when they agree. */
export function checkPairedFilters(query: Record<string, unknown>, pairs: [string, string][] = PAIRS): void {
  const errors: FieldError[] = [];
  for (const [a, b] of pairs) {
    if (query[a] !== undefined && query[b] !== undefined) {
      const message = `${a} and ${b} name the same thing; send only one of them`;
      errors.push(fieldError(a, 'ambiguous_fields', message), fieldError(b, 'ambiguous_fields', message));
    }
  }
  throwIfInvalid(errors);
}

const LOCATION_KEY = 'CASE WHEN l.deleted_at IS NULL THEN l.external_key END';

interface ReportRow {
  asset_id: number;
  asset_external_key: string;
  location_id: number | null;
  location_external_key: string | null;
  last_seen_at: number;
  asset_deleted_at: number | null;
}

/**
 * The asset-locations report: scan_positions (one row per scanned asset) joined to its asset and
 * location. The default sort walks scan_positions_seen backwards; a location filter walks
 * scan_positions_location; the asset liveness rule is checked by primary key on the page's way.
 */
export function assetLocationsReport(shard: Shard, orgId: number, f: ReportFilters, now: number): Page<AssetLocationItem> {
  const base = orgQuery('scan_positions', 'p', orgId)
    .join('assets as a', 'a.id', 'p.asset_id')
    .leftJoin('locations as l', 'l.id', 'p.location_id');
  applyLiveness(base, 'a', now, f.include_deleted === true);
  if (f.location_id !== undefined) base.whereIn('p.location_id', f.location_id);
  if (f.location_external_key !== undefined) {
    // A natural-key lookup: the live, currently effective location with that key.
    const keyed = applyLiveness(sqlBuilder('locations as fl').select('fl.id').where('fl.org_id', orgId).whereIn('fl.external_key', f.location_external_key), 'fl', now, false);
    base.whereIn('p.location_id', keyed);
  }
  if (f.asset_id !== undefined) base.whereIn('p.asset_id', f.asset_id);
  if (f.asset_external_key !== undefined) base.whereIn('a.external_key', f.asset_external_key);
  if (f.q !== undefined && f.q !== '') {
    const pattern = likePattern(f.q);
    base.where((w: Knex.QueryBuilder) =>
      w
        .whereRaw("a.name LIKE ? ESCAPE '\\'", [pattern])
        .orWhereRaw("a.external_key LIKE ? ESCAPE '\\'", [pattern])
        .orWhereExists(sqlBuilder('tags as t').select(sqlBuilder.raw('1')).whereRaw('t.asset_id = a.id').whereNull('t.deleted_at').whereRaw("t.value LIKE ? ESCAPE '\\'", [pattern])),
    );
  }
  const { rows, total } = runList<ReportRow>(shard.readerStatements, base, {
    sort: f.sort,
    columns: { asset_last_seen: 'p.last_seen_at', asset_external_key: 'a.external_key', location_external_key: 'location_external_key' },
    idColumn: 'p.asset_id',
    limit: f.limit,
    offset: f.offset,
    select: [
      'p.asset_id',
      'a.external_key as asset_external_key',
      'p.location_id',
      sqlBuilder.raw(`${LOCATION_KEY} as location_external_key`) as unknown as string,
      'p.last_seen_at',
      'a.deleted_at as asset_deleted_at',
    ],
  });
  return {
    data: rows.map((r) => ({
      asset_id: r.asset_id,
      asset_external_key: r.asset_external_key,
      location_id: r.location_id,
      location_external_key: r.location_external_key,
      asset_last_seen: formatTimestamp(r.last_seen_at),
      asset_deleted_at: formatNullableTimestamp(r.asset_deleted_at),
    })),
    limit: f.limit,
    offset: f.offset,
    total_count: total,
  };
}
