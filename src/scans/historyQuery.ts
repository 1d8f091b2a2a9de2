import { formatTimestamp } from '../wire/timestamps.js';
import type { SortTerm } from '../http/query.js';
import { runList, type Page } from '../masterdata/list.js';
import type { TagView } from '../masterdata/fields.js';
import type { Shard } from '../shards/shard.js';
import { sqlBuilder } from '../storage/sqlite.js';
import type { HistoryEvent } from './schemas/historyEvent.js';
import { laidOver, readerOverlayOf } from './rereadLog.js';

export interface HistoryFilters {
  from?: number;
  to?: number;
  sort: SortTerm[];
  limit: number;
  offset: number;
}

interface HistoryRow {
  id: number;
  location_id: number;
  event_observed_at: number;
  last_seen_at: number;
  read_count: number;
  l_id: number | null;
  l_external_key: string;
  l_name: string;
  l_parent_id: number | null;
  l_is_active: number;
  l_effective: number;
}

interface OpenVisit {
  asset_id: number;
  visit_id: number;
  last_seen_at: number;
  visit_read_count: number;
  visit_count: number;
}

/** True when the asset exists in the org and is not soft-deleted (the by-id rule). */
export function assetExists(shard: Shard, orgId: number, assetId: number): boolean {
  return (
    shard.readerStatements.get('SELECT 1 FROM assets WHERE id = ? AND org_id = ? AND deleted_at IS NULL').get(assetId, orgId) !== undefined
  );
}

const COUNT_RANGE = 'SELECT count(*) FROM scan_history WHERE asset_id = ? AND event_observed_at >= ? AND event_observed_at <= ?';
// Apart: SQLite reads a lone min() or max() from one end of the index, but walks the range for both.
const FIRST_VISIT = 'SELECT min(event_observed_at) FROM scan_history WHERE asset_id = ?';
const LAST_VISIT = 'SELECT max(event_observed_at) FROM scan_history WHERE asset_id = ?';

/**
 * The visits of an asset within [from, to], exact, counting whichever looks smaller: the window, or
 * the visits outside it (before `from`, after `to`: ranges of the primary key) taken from `visits`,
 * the count the writer keeps. Which is smaller is judged by time, the window's share of the span
 * from the first visit to the last (two index lookups), so a `from` a year back on a long history
 * walks the few visits before it. A wrong guess (visits bunched in time) walks at most every visit
 * of the asset, as counting the window could.
 */
export function windowCount(shard: Shard, assetId: number, visits: number, from: number | undefined, to: number | undefined): number {
  if (from === undefined && to === undefined) return visits;
  const statements = shard.readerStatements;
  const low = from ?? Number.MIN_SAFE_INTEGER;
  const high = to ?? Number.MAX_SAFE_INTEGER;
  const count = (start: number, end: number) => statements.get(COUNT_RANGE).pluck().get(assetId, start, end) as number;
  const span = {
    first: statements.get(FIRST_VISIT).pluck().get(assetId) as number | null,
    last: statements.get(LAST_VISIT).pluck().get(assetId) as number | null,
  };
  if (span.first === null || span.last === null || low > high) return 0;
  const inside = Math.max(0, Math.min(high, span.last) - Math.max(low, span.first));
  if (span.last === span.first || inside * 2 <= span.last - span.first) return count(low, high);
  const before = from === undefined || from <= span.first ? 0 : count(span.first, from - 1);
  const after = to === undefined || to >= span.last ? 0 : count(to + 1, span.last);
  return visits - before - after;
}

/**
 * One asset's visits: a range read of scan_history's primary key (asset_id, event_observed_at, id)
 * with the location joined (visits with equal event_observed_at in id order, in the sort's
 * direction), from whichever end of the range is nearer the page; the open visit's running figures
 * and, without a time filter, the count of visits come from scan_positions (the writer keeps
 * visit_count with the rows it inserts), and the page's location tags from one IN query.
 */
export function assetHistory(shard: Shard, assetId: number, f: HistoryFilters, now: number): Page<HistoryEvent> {
  // One read transaction: the count, the open visit and the rows come from one snapshot.
  return shard.reader.transaction(() => historyPage(shard, assetId, f, now))();
}

function historyPage(shard: Shard, assetId: number, f: HistoryFilters, now: number): Page<HistoryEvent> {
  const row = shard.readerStatements
    .get('SELECT asset_id, visit_id, last_seen_at, visit_read_count, visit_count FROM scan_positions WHERE asset_id = ?')
    .get(assetId) as OpenVisit | undefined;
  const open = row === undefined ? undefined : laidOver(readerOverlayOf(shard).catchUp(), row);
  const base = sqlBuilder('scan_history as h').leftJoin('locations as l', 'l.id', 'h.location_id').where('h.asset_id', assetId);
  if (f.from !== undefined) base.where('h.event_observed_at', '>=', f.from);
  if (f.to !== undefined) base.where('h.event_observed_at', '<=', f.to);
  const { rows, total } = runList<HistoryRow>(shard.readerStatements, base, {
    sort: f.sort,
    columns: { event_observed_at: 'h.event_observed_at' },
    idColumn: 'h.id',
    tiebreak: 'follow',
    count: () => windowCount(shard, assetId, open?.visit_count ?? 0, f.from, f.to),
    fromNearerEnd: true,
    limit: f.limit,
    offset: f.offset,
    select: [
      'h.id',
      'h.location_id',
      'h.event_observed_at',
      'h.last_seen_at',
      'h.read_count',
      'l.id as l_id',
      'l.external_key as l_external_key',
      'l.name as l_name',
      'l.parent_id as l_parent_id',
      'l.is_active as l_is_active',
      sqlBuilder.raw('(l.deleted_at IS NULL AND l.valid_from <= ? AND (l.valid_to IS NULL OR l.valid_to > ?)) as l_effective', [
        now,
        now,
      ]) as unknown as string,
    ],
  });
  const tagsByLocation = new Map<number, TagView[]>();
  const locationIds = [...new Set(rows.filter((r) => r.l_effective === 1).map((r) => r.location_id))];
  if (locationIds.length > 0) {
    const q = sqlBuilder('tags')
      .select('id', 'tag_type', 'value', 'location_id')
      .whereIn('location_id', locationIds)
      .whereNull('deleted_at')
      .orderBy('id')
      .toSQL()
      .toNative();
    for (const t of shard.readerStatements.get(q.sql).all(...(q.bindings as unknown[])) as (TagView & { location_id: number })[]) {
      let list = tagsByLocation.get(t.location_id);
      if (list === undefined) tagsByLocation.set(t.location_id, (list = []));
      list.push({ id: t.id, tag_type: t.tag_type, value: t.value });
    }
  }
  return {
    data: rows.map((r) => {
      const isOpen = open !== undefined && open.visit_id === r.id;
      return {
        asset_id: assetId,
        location_id: r.location_id,
        event_observed_at: formatTimestamp(r.event_observed_at),
        last_seen_at: formatTimestamp(isOpen ? open.last_seen_at : r.last_seen_at),
        read_count: isOpen ? open.visit_read_count : r.read_count,
        location:
          r.l_effective === 1
            ? {
                id: r.location_id,
                external_key: r.l_external_key,
                name: r.l_name,
                parent_id: r.l_parent_id,
                is_active: r.l_is_active === 1,
                tags: tagsByLocation.get(r.location_id) ?? [],
              }
            : null,
      };
    }),
    limit: f.limit,
    offset: f.offset,
    total_count: total,
  };
}
