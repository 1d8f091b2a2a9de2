import type { Knex } from 'knex';
import { fieldError, throwIfInvalid, type FieldError } from '../errors/catalog.js';
import type { SortTerm } from '../http/query.js';
import { formatNullableTimestamp, formatTimestamp } from '../wire/timestamps.js';
import { registerLowerFunction, substringMatch } from '../masterdata/filters.js';
import { applyLiveness, orgQuery, type Page } from '../masterdata/list.js';
import { textIndexQuery, textIndexTable } from '../masterdata/textIndex.js';
import type { Shard } from '../shards/shard.js';
import { sqlBuilder } from '../storage/sqlite.js';
import { lastSeq } from '../events/read.js';
import { locationMembersCommand, reportPageCommand } from './reportIndex.js';
import { laidOver, readerOverlayOf, SEEN_FUNCTION } from './rereadLog.js';
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

export interface ReportRow {
  asset_id: number;
  asset_external_key: string;
  location_id: number | null;
  location_external_key: string | null;
  last_seen_at: number;
  visit_id: number;
  visit_read_count: number;
  asset_deleted_at: number | null;
}

/**
 * The rows of one page, by asset id, in one cached statement (ids passed as a JSON array). The
 * asset's key and liveness are the copies on its position (migrations 005 and 021), kept in step
 * with assets by triggers: no assets lookup per row.
 */
const PAGE_ROWS = `SELECT p.asset_id, p.asset_external_key, p.location_id, ${LOCATION_KEY} AS location_external_key,
    p.last_seen_at, p.visit_id, p.visit_read_count, p.asset_deleted_at
  FROM scan_positions p LEFT JOIN locations l ON l.id = p.location_id
  WHERE p.asset_id IN (SELECT value FROM json_each(?))`;

/** How often a page is asked of the index again when a commit changed its rows in between, before SQLite answers it. */
const INDEX_ATTEMPTS = 3;

/** The rows by id, last_seen_at with the re-read log laid over; inside a read transaction (the log's rows and the positions from one snapshot). */
function pageRows(shard: Shard, ids: number[]): Map<number, ReportRow> {
  const byId = new Map<number, ReportRow>();
  if (ids.length === 0) return byId;
  const overlay = readerOverlayOf(shard).catchUp();
  for (const r of shard.readerStatements.get(PAGE_ROWS).all(JSON.stringify(ids)) as ReportRow[]) byId.set(r.asset_id, laidOver(overlay, r));
  return byId;
}

/**
 * The report's matching positions (alias p) for its filters at `now`, no order, no paging: the
 * SQLite side of the report and its export. With `q`, the connection needs the lower function.
 */
export function reportBase(
  orgId: number,
  f: Omit<ReportFilters, 'sort' | 'limit' | 'offset'>,
  now: number,
  joinAssets = false,
  walkTable = false,
  members?: number[],
): Knex.QueryBuilder {
  const includeDeleted = f.include_deleted === true;
  const q = f.q !== undefined && f.q !== '' ? f.q : undefined;
  const byLocation = f.location_id !== undefined || f.location_external_key !== undefined;
  // With a location filter, the positions the report index names (`members`, a superset: the
  // filters below still decide), looked up by id; without them the organization's positions are
  // walked (no SQLite index holds location_id: migration 020).
  // With q and no location, the positions of the text index's rows (textIndex.ts: every asset q
  // matches is among them; the report's q leaves out the description, which the index holds, so the
  // exact test below still runs). CROSS JOIN keeps them outside: the planner would rather walk the org.
  const indexed = q !== undefined && !byLocation ? textIndexQuery(q) : undefined;
  const base: Knex.QueryBuilder =
    members !== undefined
      ? sqlBuilder
          .from(sqlBuilder.raw('json_each(?) AS m CROSS JOIN scan_positions AS p ON p.asset_id = m.value', [JSON.stringify(members)]))
          .where('p.org_id', orgId)
      : indexed !== undefined
        ? sqlBuilder
            .from(
              sqlBuilder.raw(`${textIndexTable('assets')}(?) AS tm CROSS JOIN scan_positions AS p ON p.asset_id = tm.rowid`, [
                indexed.match,
              ]),
            )
            .where('p.org_id', orgId)
        : orgQuery('scan_positions', 'p', orgId, walkTable);
  base
    .whereRaw('+p.asset_valid_from <= ?', [now])
    .andWhere((w: Knex.QueryBuilder) => w.whereNull('p.asset_valid_to').orWhere('p.asset_valid_to', '>', now));
  if (!includeDeleted) base.whereNull('p.asset_deleted_at');
  if (f.location_id !== undefined) base.whereIn('p.location_id', f.location_id);
  if (f.location_external_key !== undefined) {
    // A natural-key lookup: the live, currently effective location with that key.
    const keyed = applyLiveness(
      sqlBuilder('locations as fl').select('fl.id').where('fl.org_id', orgId).whereIn('fl.external_key', f.location_external_key),
      'fl',
      now,
      false,
    );
    base.whereIn('p.location_id', keyed);
  }
  if (f.asset_id !== undefined) base.whereIn('p.asset_id', f.asset_id);
  if (f.asset_external_key !== undefined || q !== undefined || joinAssets) base.join('assets as a', 'a.id', 'p.asset_id');
  if (f.asset_external_key !== undefined) base.whereIn('a.external_key', f.asset_external_key);
  if (q !== undefined) {
    // Case-insensitive beyond ASCII too, like the asset and location lists (the caller registers the function).
    const match = substringMatch(q);
    base.where((w: Knex.QueryBuilder) =>
      w
        .whereRaw(match.sql('a.name'), [match.value])
        .orWhereRaw(match.sql('a.external_key'), [match.value])
        .orWhereExists(
          sqlBuilder('tags as t')
            .select(sqlBuilder.raw('1'))
            .whereRaw('t.asset_id = a.id')
            .whereNull('t.deleted_at')
            .whereRaw(match.sql('t.value'), [match.value]),
        ),
    );
  }
  return base;
}

/**
 * The report through the shard actor's rank indexes (reportIndex.ts) when they answer the query:
 * sorted by asset_last_seen alone, the whole org (with or without include_deleted) or one location
 * (live assets), or by asset_external_key or location_external_key alone, the whole org (live
 * assets); no other filter. Undefined otherwise (and for a time before a validity boundary the index has applied):
 * then the SQLite walk below answers.
 */
export async function indexedReport(
  shard: Shard,
  orgId: number,
  f: ReportFilters,
  now: number,
): Promise<Page<AssetLocationItem> | undefined> {
  const [term, ...more] = f.sort;
  if (term === undefined || more.length > 0) return undefined;
  const sortBy = term.field as 'asset_last_seen' | 'asset_external_key' | 'location_external_key';
  const byKey = sortBy !== 'asset_last_seen';
  if (byKey && (f.include_deleted === true || f.location_id !== undefined || f.location_external_key !== undefined)) return undefined;
  if ((f.q !== undefined && f.q !== '') || f.asset_id !== undefined || f.asset_external_key !== undefined) return undefined;
  const includeDeleted = f.include_deleted === true;
  let locationId: number | undefined;
  if (includeDeleted && (f.location_id !== undefined || f.location_external_key !== undefined)) return undefined;
  if (f.location_id !== undefined) {
    if (f.location_id.length !== 1) return undefined;
    locationId = f.location_id[0];
  } else if (f.location_external_key !== undefined) {
    if (f.location_external_key.length !== 1) return undefined;
    const keyed = applyLiveness(
      sqlBuilder('locations as fl').select('fl.id').where('fl.org_id', orgId).whereIn('fl.external_key', f.location_external_key),
      'fl',
      now,
      false,
    )
      .limit(2)
      .toSQL()
      .toNative();
    const ids = shard.readerStatements
      .get(keyed.sql)
      .pluck()
      .all(...(keyed.bindings as unknown[])) as number[];
    if (ids.length !== 1) return undefined;
    locationId = ids[0];
  }
  for (let attempt = 0; attempt < INDEX_ATTEMPTS; attempt++) {
    const page = await shard.send(reportPageCommand, {
      orgId,
      locationId,
      includeDeleted,
      sortBy,
      descending: term.desc,
      offset: f.offset,
      limit: f.limit,
    });
    if (page === undefined) return undefined;
    // The rows come from this thread's connection, which may already see a later commit: the page
    // stands only if every row is still live and ranked where the index put it.
    const byId = shard.reader.transaction(() => pageRows(shard, page.ids))();
    const rows: ReportRow[] = [];
    for (let i = 0; i < page.ids.length; i++) {
      const row = byId.get(page.ids[i]!);
      const ranked =
        sortBy === 'asset_external_key'
          ? row?.asset_external_key
          : sortBy === 'location_external_key'
            ? row?.location_external_key
            : row?.last_seen_at;
      if (row === undefined || ranked !== page.keys[i] || (row.asset_deleted_at !== null && !includeDeleted)) break;
      rows.push(row);
    }
    if (rows.length === page.ids.length) return reportPage(rows, f, page.total);
  }
  return undefined;
}

const LIVE_COUNT = `SELECT
    coalesce((SELECT live_positions FROM scan_report_counts WHERE org_id = @org), 0)
  - (SELECT count(*) FROM scan_positions WHERE org_id = @org AND asset_deleted_at IS NULL AND asset_valid_from > @now)
  - (SELECT count(*) FROM scan_positions WHERE org_id = @org AND asset_deleted_at IS NULL AND asset_valid_to IS NOT NULL AND asset_valid_to <= @now)`;

/** Tests only (TRACKD_TEST_MEMBERS_DELAY_MS): a pause between the report index's answer and the read, for a commit to land in. */
const membersDelayMs = Number(process.env.TRACKD_TEST_MEMBERS_DELAY_MS) || 0;
/** Tests only (TRACKD_TEST_KEYS_DELAY_MS): a pause between resolving location keys and asking the report index. */
const keysDelayMs = Number(process.env.TRACKD_TEST_KEYS_DELAY_MS) || 0;

/** Every location of the organization with one of these keys, whatever its liveness (the report's filter decides). */
const LOCATIONS_BY_KEY = 'SELECT id FROM locations WHERE org_id = ? AND external_key IN (SELECT value FROM json_each(?)) ORDER BY id';

/**
 * The asset-locations report where the report index does not answer. The filters, the sort and the
 * asset liveness rule run on scan_positions alone (the asset's liveness and key are copied there,
 * migrations 005 and 021); no index holds last_seen_at (migration 009), so the matching rows are
 * sorted. The assets table is joined only for q and the asset_external_key filter, the locations
 * table only for the location_external_key sort. The page's rows are then read by id.
 *
 * With a location filter the report index names the positions at the locations (no SQLite index
 * holds location_id: migration 020), with the organization's last event sequence then. Every change
 * of which positions are at a location is an event, so the page stands when this thread's snapshot
 * ends at the same sequence; liveness is judged at the index's time. Otherwise it is asked again,
 * then the organization's positions are walked.
 */
export async function assetLocationsReport(shard: Shard, orgId: number, f: ReportFilters, now: number): Promise<Page<AssetLocationItem>> {
  if (f.location_id !== undefined || f.location_external_key !== undefined) {
    const keys = f.location_external_key === undefined ? undefined : JSON.stringify(f.location_external_key);
    const keyed = () => shard.readerStatements.get(LOCATIONS_BY_KEY).pluck().all(orgId, keys) as number[];
    for (let attempt = 0; attempt < INDEX_ATTEMPTS; attempt++) {
      const locationIds = f.location_id ?? keyed();
      if (keys !== undefined && keysDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, keysDelayMs));
      const members = await shard.send(locationMembersCommand, { orgId, locationIds, includeDeleted: f.include_deleted === true });
      if (members === undefined) break;
      if (membersDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, membersDelayMs));
      // One read transaction: the re-read log's rows, the sequence, the count and the page from one snapshot.
      // The keys are resolved again in it: a location given one of them may have come before the index answered.
      const page = shard.reader.transaction(() =>
        lastSeq(shard, orgId) === members.asOfSeq && (keys === undefined || keyed().join() === locationIds.join())
          ? sqlReport(shard, orgId, f, members.at, members.ids)
          : undefined,
      )();
      if (page !== undefined) return page;
    }
  }
  return shard.reader.transaction(() => sqlReport(shard, orgId, f, now))();
}

function sqlReport(shard: Shard, orgId: number, f: ReportFilters, now: number, members?: number[]): Page<AssetLocationItem> {
  readerOverlayOf(shard).catchUp();
  const includeDeleted = f.include_deleted === true;
  const q = f.q !== undefined && f.q !== '' ? f.q : undefined;
  const sortsBy = (field: string) => f.sort.some((s) => s.field === field);
  const byLocation = f.location_id !== undefined || f.location_external_key !== undefined;
  if (q !== undefined) registerLowerFunction(shard);
  const base = reportBase(orgId, f, now, false, false, members);
  const unfiltered = !includeDeleted && !byLocation && f.asset_id === undefined && f.asset_external_key === undefined && q === undefined;
  let total: number;
  if (unfiltered) {
    total = shard.readerStatements.get(LIVE_COUNT).pluck().get({ org: orgId, now }) as number;
  } else {
    const counted = base.clone().count({ n: '*' }).toSQL().toNative();
    total = (shard.readerStatements.get(counted.sql).get(...(counted.bindings as unknown[])) as { n: number }).n;
  }
  let rows: ReportRow[] = [];
  if (f.offset < total) {
    const page = base.clone().select('p.asset_id');
    if (sortsBy('location_external_key')) page.leftJoin('locations as l', 'l.id', 'p.location_id');
    const columns: Record<string, string> = {
      asset_last_seen: `${SEEN_FUNCTION}(p.asset_id, p.visit_id, p.visit_read_count, p.last_seen_at)`,
      asset_external_key: 'p.asset_external_key',
      location_external_key: LOCATION_KEY,
    };
    for (const term of f.sort) page.orderByRaw(`${columns[term.field]} ${term.desc ? 'desc' : 'asc'}`);
    // The tiebreak follows the last sort term's direction, so that one index serves the whole order.
    page
      .orderBy('p.asset_id', f.sort[f.sort.length - 1]?.desc ? 'desc' : 'asc')
      .limit(f.limit)
      .offset(f.offset);
    const native = page.toSQL().toNative();
    const ids = shard.readerStatements
      .get(native.sql)
      .pluck()
      .all(...(native.bindings as unknown[])) as number[];
    const byId = pageRows(shard, ids);
    rows = ids.map((id) => byId.get(id)).filter((r): r is ReportRow => r !== undefined);
  }
  return reportPage(rows, f, total);
}

function reportPage(rows: ReportRow[], f: ReportFilters, total: number): Page<AssetLocationItem> {
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
