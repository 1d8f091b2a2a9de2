import { formatTimestamp } from '../wire/timestamps.js';
import type { SortTerm } from '../http/query.js';
import { runList, type Page } from '../masterdata/list.js';
import type { TagView } from '../masterdata/fields.js';
import type { Shard } from '../shards/shard.js';
import { sqlBuilder } from '../storage/sqlite.js';
import type { HistoryEvent } from './schemas/historyEvent.js';
import { laidOver, readerOverlayOf } from './rereadLog.js';
import { MARK_SPACING, markAtOrBelow, visitsBefore } from './historyMarks.js';
import type { Knex } from 'knex';

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

/**
 * The visits of an asset within [from, to], exact: the visits before `to` + 1 less those before
 * `from`, each found from the rank mark below it (historyMarks.ts) and at most 2 x MARK_SPACING
 * visits counted past it; `visits` (the count the writer keeps) when the window is open at the end.
 */
export function windowCount(shard: Shard, assetId: number, visits: number, from: number | undefined, to: number | undefined): number {
  return windowRanks(shard, assetId, visits, from, to).total;
}

/** The window's visits (`total`) and the visits before it (`before`: the rank of its first). */
function windowRanks(shard: Shard, assetId: number, visits: number, from: number | undefined, to: number | undefined) {
  if (from === undefined && to === undefined) return { before: 0, total: visits };
  if (from !== undefined && to !== undefined && from > to) return { before: 0, total: 0 };
  const statements = shard.readerStatements;
  const before = from === undefined ? 0 : visitsBefore(statements, assetId, from);
  const through = to === undefined ? visits : visitsBefore(statements, assetId, to + 1);
  return { before, total: Math.max(0, through - before) };
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
  const { before, total } = windowRanks(shard, assetId, open?.visit_count ?? 0, f.from, f.to);
  const select = [
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
  ];
  const visits = () => sqlBuilder('scan_history as h').leftJoin('locations as l', 'l.id', 'h.location_id').where('h.asset_id', assetId);
  const span = seekSpan(f, total);
  const rows =
    span !== undefined
      ? seekRows(shard, assetId, before + span.start, span, visits().select(select))
      : runList<HistoryRow>(shard.readerStatements, windowed(visits(), f), {
          sort: f.sort,
          columns: { event_observed_at: 'h.event_observed_at' },
          idColumn: 'h.id',
          tiebreak: 'follow',
          count: () => total,
          fromNearerEnd: true,
          limit: f.limit,
          offset: f.offset,
          select,
        }).rows;
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

function windowed(q: Knex.QueryBuilder, f: HistoryFilters): Knex.QueryBuilder {
  if (f.from !== undefined) q.where('h.event_observed_at', '>=', f.from);
  if (f.to !== undefined) q.where('h.event_observed_at', '<=', f.to);
  return q;
}

interface SeekSpan {
  /** The page's first visit, counted from the window's first in ascending order. */
  start: number;
  length: number;
  desc: boolean;
}

/**
 * Where a page lies in its window when the nearer end is more than 2 x MARK_SPACING visits away
 * (read through a mark: seekRows); undefined for a page nearer an end, read from that end as
 * runList does.
 */
function seekSpan(f: HistoryFilters, total: number): SeekSpan | undefined {
  // Time in the first term's direction, ties by id in the last's (runList): one direction for both, or no seek.
  const desc = f.sort.at(-1)?.desc === true;
  if (f.offset >= total || (f.sort[0]?.desc === true) !== desc) return undefined;
  const length = Math.min(f.limit, total - f.offset);
  const start = desc ? total - f.offset - length : f.offset;
  return Math.min(start, total - start - length) <= 2 * MARK_SPACING ? undefined : { start, length, desc };
}

/**
 * The page whose first visit has rank `rank` among the asset's visits: the mark at or below that
 * rank, and the page read from the mark on, ascending (reversed for a descending sort).
 */
function seekRows(shard: Shard, assetId: number, rank: number, span: SeekSpan, q: Knex.QueryBuilder): HistoryRow[] {
  const mark = markAtOrBelow(shard.readerStatements, assetId, rank);
  if (mark !== undefined) q.whereRaw('(h.event_observed_at, h.id) >= (?, ?)', [mark.at, mark.id]);
  const page = q
    .orderBy('h.event_observed_at', 'asc')
    .orderBy('h.id', 'asc')
    .limit(span.length)
    .offset(rank - (mark?.rank ?? 0))
    .toSQL()
    .toNative();
  const rows = shard.readerStatements.get(page.sql).all(...(page.bindings as unknown[])) as HistoryRow[];
  return span.desc ? rows.reverse() : rows;
}
