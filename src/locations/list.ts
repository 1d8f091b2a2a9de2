import { fieldError, throwIfInvalid } from '../errors/catalog.js';
import type { SortTerm } from '../http/query.js';
import { applyLiveness, likePattern, orgQuery, runList, type Page } from '../masterdata/list.js';
import type { Shard } from '../shards/shard.js';
import type { LocationView } from './schemas.js';
import type { LocationRow } from './store.js';
import { toViews } from './view.js';

const SELECT = [
  'l.id',
  'l.org_id',
  'l.external_key',
  'l.name',
  'l.description',
  'l.parent_id',
  'p.external_key as parent_external_key',
  'l.is_active',
  'l.valid_from',
  'l.valid_to',
  'l.created_at',
  'l.updated_at',
  'l.deleted_at',
];

const SORT_COLUMNS = { external_key: 'l.external_key', name: 'l.name', created_at: 'l.created_at' };

/** GET /api/v1/locations (interface 4.3): any-of filters, paired parent filters, q, default scope. */
export function listLocations(shard: Shard, orgId: number, query: Record<string, unknown>): Page<LocationView> {
  const parentIds = query.parent_id as number[] | undefined;
  const parentKeys = query.parent_external_key as string[] | undefined;
  if (parentIds !== undefined && parentKeys !== undefined) {
    const message = 'parent_id and parent_external_key are two forms of one filter; send only one of them';
    throwIfInvalid([fieldError('parent_id', 'ambiguous_fields', message), fieldError('parent_external_key', 'ambiguous_fields', message)]);
  }
  // The parent is joined by id whatever its state, so parent_external_key filters on what the view shows.
  const base = orgQuery('locations', 'l', orgId).leftJoin('locations as p', function () {
    this.on('p.id', '=', 'l.parent_id').andOn('p.org_id', '=', 'l.org_id');
  });
  applyLiveness(base, 'l', Date.now(), query.include_deleted === true);
  const keys = query.external_key as string[] | undefined;
  if (keys !== undefined) base.whereIn('l.external_key', keys);
  if (parentIds !== undefined) base.whereIn('l.parent_id', parentIds);
  if (parentKeys !== undefined) base.whereIn('p.external_key', parentKeys);
  if (query.is_active !== undefined) base.where('l.is_active', query.is_active ? 1 : 0);
  if (typeof query.q === 'string' && query.q !== '') {
    const pattern = likePattern(query.q);
    base.where((w) =>
      w
        .whereRaw("l.name LIKE ? ESCAPE '\\'", [pattern])
        .orWhereRaw("l.external_key LIKE ? ESCAPE '\\'", [pattern])
        .orWhereRaw("l.description LIKE ? ESCAPE '\\'", [pattern])
        .orWhereRaw(
          "EXISTS (SELECT 1 FROM tags t WHERE t.org_id = l.org_id AND t.location_id = l.id AND t.deleted_at IS NULL AND t.value LIKE ? ESCAPE '\\')",
          [pattern],
        ),
    );
  }
  const limit = query.limit as number;
  const offset = query.offset as number;
  const { rows, total } = runList<LocationRow>(shard.readerStatements, base, {
    sort: query.sort as SortTerm[],
    columns: SORT_COLUMNS,
    idColumn: 'l.id',
    limit,
    offset,
    select: SELECT,
  });
  return { data: toViews(shard.reader, orgId, rows), limit, offset, total_count: total };
}
