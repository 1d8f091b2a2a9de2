import { fieldError, throwIfInvalid } from '../errors/catalog.js';
import { applyMasterFilters, masterPage, type TagMatch } from '../masterdata/filters.js';
import { orgQuery, type Page } from '../masterdata/list.js';
import type { Shard } from '../shards/shard.js';
import type { LocationView } from './schemas.js';
import { PARENT_COLUMNS, type LocationRow } from './store.js';
import { toView } from './view.js';

const SORT_COLUMNS = { external_key: 'l.external_key', name: 'l.name', created_at: 'l.created_at' };

/** GET /api/v1/locations: the shared list filters plus the paired parent filters. */
export function listLocations(shard: Shard, orgId: number, query: Record<string, unknown>, now: number): Page<LocationView> {
  const parentIds = query.parent_id as number[] | undefined;
  const parentKeys = query.parent_external_key as string[] | undefined;
  if (parentIds !== undefined && parentKeys !== undefined) {
    const message = 'parent_id and parent_external_key are two forms of one filter; send only one of them';
    throwIfInvalid([fieldError('parent_id', 'ambiguous_fields', message), fieldError('parent_external_key', 'ambiguous_fields', message)]);
  }
  const build = (tagMatch: TagMatch) => {
    const base = applyMasterFilters(orgQuery('locations', 'l', orgId), 'l', orgId, query, now, 'location_id', tagMatch);
    if (parentIds !== undefined) base.whereIn('l.parent_id', parentIds);
    // Parents by key whatever their state, so the filter matches the parent_external_key the views show.
    if (parentKeys !== undefined) {
      base.whereIn('l.parent_id', (sub) =>
        sub.select('p.id').from('locations as p').where('p.org_id', orgId).whereIn('p.external_key', parentKeys),
      );
    }
    return base;
  };
  return masterPage<LocationRow, LocationView>(shard, build, {
    table: 'locations',
    alias: 'l',
    orgId,
    tagColumn: 'location_id',
    query,
    columns: SORT_COLUMNS,
    extraSelect: PARENT_COLUMNS,
    toView,
    now,
    // locations_org_key; name and created_at sort the whole match.
    indexedSorts: ['external_key'],
  });
}
