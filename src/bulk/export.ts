import Database from 'better-sqlite3';
import type { Knex } from 'knex';
import type { ReplyStream, Reply } from '../http/route.js';
import type { LocationView } from '../locations/schemas.js';
import { PARENT_COLUMNS, type LocationRow } from '../locations/store.js';
import { toView as locationView } from '../locations/view.js';
import { addLowerFunction, applyMasterFilters } from '../masterdata/filters.js';
import { orgQuery } from '../masterdata/list.js';
import { tagsJsonColumn } from '../masterdata/tags.js';
import { masterColumns } from '../masterdata/view.js';
import { reportBase, type ReportFilters, type ReportRow } from '../scans/reportQuery.js';
import { laidOver, overlayOf } from '../scans/rereadLog.js';
import type { Shard } from '../shards/shard.js';
import { sqlBuilder, type Db } from '../storage/sqlite.js';
import { formatNullableTimestamp, formatTimestamp, isoSql } from '../wire/timestamps.js';
import { CSV_COLUMNS } from './rowSource.js';

/**
 * Exports: every row of an org that a list's filters select, streamed as NDJSON (the list's item,
 * one per line) or CSV (the import's columns, so that an exported file imports back in upsert mode
 * as a no-op), from a read transaction of a connection of its own: one point in time however long
 * the client takes, while writes go on. Rows are read one at a time and written in pieces of about
 * PIECE_BYTES, each only when the socket took the last (server.ts, onWritable): constant memory.
 */

/** Size of one written piece of an export. */
const PIECE_BYTES = 64 * 1024;

export type ExportFormat = 'ndjson' | 'csv';

/** The export's format from `Accept`: text/csv gives CSV, anything else (application/x-ndjson, * / *, none) NDJSON. */
export function exportFormat(accept: string): ExportFormat {
  return /(^|,)\s*text\/csv\b/i.test(accept) ? 'csv' : 'ndjson';
}

/**
 * The sequence of the org's event log (migration 010) that an export reflects, read inside the
 * export's read transaction as its first read: every event up to it is in the export and none after
 * it, so "export, then read events after this sequence" is an exact sync.
 */
export function eventLogSequence(db: Db, orgId: number): number {
  return (db.prepare('SELECT last_seq FROM event_heads WHERE org_id = ?').pluck().get(orgId) as number | undefined) ?? 0;
}

/** A CSV cell: quoted when it holds a comma, quote, CR or LF (RFC 4180). */
export function csvCell(value: string): string {
  return /[",\r\n]/.test(value) ? `"${value.replace(/"/g, '""')}"` : value;
}

const csvLine = (cells: string[]) => cells.map(csvCell).join(',');

/** `csvCell`'s test in SQL: the text holds a quote, comma, CR or LF. */
const needsQuotesSql = (text: string) =>
  `instr(${text}, '"') OR instr(${text}, ',') OR instr(${text}, char(13)) OR instr(${text}, char(10))`;
/** `csvCell`'s quoting in SQL. */
const quotedSql = (text: string) => `'"' || replace(${text}, '"', '""') || '"'`;

/** `csvCell` in SQL, for an expression of text that is cheap to repeat (a column). */
function csvCellSql(text: string): string {
  return `CASE WHEN ${needsQuotesSql(text)} THEN ${quotedSql(text)} ELSE ${text} END`;
}

const tagsCell = (tags: { tag_type: string; value: string }[]) => tags.map((t) => `${t.tag_type}:${t.value}`).join(';');

interface ExportSource<Row> {
  sql: Knex.QueryBuilder;
  ndjson: (row: Row) => string;
  csvHeader: readonly string[];
  /** The row's CSV line, without its line feed. */
  csv: (row: Row) => string;
  /** Given the export's connection inside its read transaction: what each row becomes before it is written (default: itself). */
  rowsAt?: (db: Db) => (row: Row) => Row;
}

/**
 * The stream of one export: opens its own read-only connection to the shard's file, begins a read
 * transaction and walks the rows with one statement's iterator; `close` ends all three.
 */
function exportStream<Row>(
  shard: Shard,
  orgId: number,
  source: ExportSource<Row>,
  format: ExportFormat,
): { stream: ReplyStream; sequence?: number } {
  const db = new Database(shard.reader.name, { readonly: true, fileMustExist: true });
  addLowerFunction(db);
  db.exec('BEGIN');
  // The first read fixes the snapshot: the sequence and every row come from the same point in time.
  const sequence = eventLogSequence(db, orgId);
  const native = source.sql.toSQL().toNative();
  // Before the iterator opens (the connection runs nothing else while it does).
  const rowOf = source.rowsAt?.(db) ?? ((row: Row) => row);
  const rows = db.prepare(native.sql).iterate(...(native.bindings as unknown[])) as IterableIterator<Row>;
  let header = format === 'csv' ? `${csvLine([...source.csvHeader])}\n` : '';
  let open = true;
  const close = () => {
    if (!open) return;
    open = false;
    rows.return?.();
    if (db.inTransaction) db.exec('COMMIT');
    db.close();
  };
  const stream: ReplyStream = {
    next() {
      if (!open) return undefined;
      let piece = header;
      header = '';
      while (piece.length < PIECE_BYTES) {
        const next = rows.next();
        if (next.done) {
          close();
          return piece === '' ? undefined : piece;
        }
        const row = rowOf(next.value);
        piece += `${format === 'csv' ? source.csv(row) : source.ndjson(row)}\n`;
      }
      return piece;
    },
    close,
  };
  return { stream, sequence };
}

/** The streamed 200 of an export: its media type, the instant its filters were judged at, the event-log sequence when there is one. */
function exportReply<Row>(shard: Shard, orgId: number, source: ExportSource<Row>, accept: string, now: number): Reply {
  const format = exportFormat(accept);
  const { stream, sequence } = exportStream(shard, orgId, source, format);
  const headers: Record<string, string> = { 'Trackd-Export-As-Of': formatTimestamp(now) };
  if (sequence !== undefined) headers['Trackd-Event-Sequence'] = String(sequence);
  return { status: 200, stream, contentType: format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson', headers };
}

/**
 * An asset's NDJSON line built by SQLite (the AssetView's fields in its order, the tags and
 * metadata as the JSON they are stored as): the export's largest cost was building the view in
 * JavaScript (two JSON.parse, four toISOString, one JSON.stringify a row); this is about twice as
 * fast (bench/probes/bulk.ts). The test compares lines with GET /assets/{id}.
 */
const ASSET_LINE_SQL = `json_object('id', a.id, 'external_key', a.external_key, 'name', a.name, 'description', a.description,
  'is_active', json(CASE a.is_active WHEN 1 THEN 'true' ELSE 'false' END),
  'valid_from', ${isoSql('a.valid_from')}, 'valid_to', CASE WHEN a.valid_to IS NULL THEN NULL ELSE ${isoSql('a.valid_to')} END,
  'created_at', ${isoSql('a.created_at')}, 'updated_at', ${isoSql('a.updated_at')},
  'deleted_at', CASE WHEN a.deleted_at IS NULL THEN NULL ELSE ${isoSql('a.deleted_at')} END,
  'tags', json((SELECT json_group_array(json_object('id', s.id, 'tag_type', s.tag_type, 'value', s.value))
    FROM (SELECT t.id, t.tag_type, t.value FROM tags t WHERE t.asset_id = a.id AND t.org_id = a.org_id AND t.deleted_at IS NULL ORDER BY t.id) s)),
  'metadata', json(a.metadata)) AS line`;

/**
 * An asset's CSV line built by SQLite: the import's columns (CSV_COLUMNS.assets) as the JavaScript
 * of `csvLine` wrote them from the asset's view (description and valid_to empty when null,
 * is_active `true`/`false`, metadata as stored, the tags `type:value` by id joined by `;`), each
 * cell quoted by `csvCell`'s rule. About twice the rows per CPU-second of the view built in
 * JavaScript (bench/results/export10-ab.json); test/bulk/export-csv.test.ts holds it to that path's bytes.
 */
const ASSET_CSV_TAG = `t.tag_type || ':' || t.value`;
const ASSET_CSV_LINE_SQL = [
  csvCellSql('a.external_key'),
  csvCellSql('a.name'),
  csvCellSql("coalesce(a.description, '')"),
  "CASE a.is_active WHEN 1 THEN 'true' ELSE 'false' END",
  csvCellSql('a.metadata'),
  isoSql('a.valid_from'),
  `CASE WHEN a.valid_to IS NULL THEN '' ELSE ${isoSql('a.valid_to')} END`,
  // One pass over the live tags in id order: the cell and whether any of them needs the quotes.
  `coalesce((SELECT CASE WHEN max(${needsQuotesSql('s.c')})
      THEN ${quotedSql("group_concat(s.c, ';')")} ELSE group_concat(s.c, ';') END
    FROM (SELECT ${ASSET_CSV_TAG} AS c FROM tags t WHERE t.asset_id = a.id AND t.org_id = a.org_id AND t.deleted_at IS NULL ORDER BY t.id) s), '')`,
].join(" || ',' || ");

/** An org's live rows and the shard's, from kept counts. */
interface ShardShare {
  total: number | null;
  org: number | null;
}

/** Whether the org holds at least half of the shard's live rows (and some): a walk of the table then costs less than the org's index and its sort. */
const holdsMostOfShard = ({ total, org }: ShardShare) => (org ?? 0) * 2 >= (total ?? 0) && (org ?? 0) > 0;

/**
 * Whether an export of the org's assets walks the table in id order instead of an index: when no
 * filter needs an index (external keys, q) and the org holds at least half of the shard's live
 * assets (the kept counts of migration 012). By the org's index SQLite first collects and sorts
 * every id of the org (a temporary b-tree of them all before the first line); the table itself is
 * in id order, and skipping the other orgs' rows costs less than that sort once the org is most
 * of the shard.
 */
export function walksTable(db: Db, orgId: number, query: Record<string, unknown>): boolean {
  const keys = query.external_key as string[] | undefined;
  if ((keys !== undefined && keys.length > 0) || typeof query.q === 'string') return false;
  const counts = db
    .prepare(
      "SELECT sum(live) AS total, sum(CASE WHEN org_id = ? THEN live ELSE 0 END) AS org FROM master_live_counts WHERE tbl = 'assets'",
    )
    .get(orgId) as ShardShare;
  return holdsMostOfShard(counts);
}

/** The asset export's statement (one `line` column per asset, NDJSON or CSV without its line feed); the bench's ceiling runs it too. */
export function assetExportSql(
  orgId: number,
  query: Record<string, unknown>,
  format: ExportFormat,
  now: number,
  walkTable = false,
): Knex.QueryBuilder {
  const columns = [format === 'ndjson' ? ASSET_LINE_SQL : `${ASSET_CSV_LINE_SQL} AS line`];
  return applyMasterFilters(orgQuery('assets', 'a', orgId, walkTable), 'a', orgId, query, now, 'asset_id')
    .select(sqlColumns(columns))
    .orderBy('a.id');
}

/** GET /api/v1/assets/export: the asset list's filters (no paging, no sort: by id). */
export function exportAssets(shard: Shard, orgId: number, query: Record<string, unknown>, accept: string, now: number): Reply {
  const sql = assetExportSql(orgId, query, exportFormat(accept), now, walksTable(shard.reader, orgId, query));
  return exportReply<{ line: string }>(
    shard,
    orgId,
    {
      sql,
      ndjson: (row) => row.line,
      csvHeader: CSV_COLUMNS.assets,
      csv: (row) => row.line,
    },
    accept,
    now,
  );
}

/** GET /api/v1/locations/export: the location list's filters (parent filters included), by id. */
export function exportLocations(shard: Shard, orgId: number, query: Record<string, unknown>, accept: string, now: number): Reply {
  const sql = applyMasterFilters(orgQuery('locations', 'l', orgId), 'l', orgId, query, now, 'location_id');
  const parentIds = query.parent_id as number[] | undefined;
  const parentKeys = query.parent_external_key as string[] | undefined;
  if (parentIds !== undefined) sql.whereIn('l.parent_id', parentIds);
  if (parentKeys !== undefined) {
    sql.whereIn('l.parent_id', (sub) =>
      sub.select('p.id').from('locations as p').where('p.org_id', orgId).whereIn('p.external_key', parentKeys),
    );
  }
  sql.select(sqlColumns([...masterColumns('l'), ...PARENT_COLUMNS, tagsJsonColumn('l', 'location_id')])).orderBy('l.id');
  return exportReply<LocationRow>(
    shard,
    orgId,
    {
      sql,
      ndjson: (row) => JSON.stringify(locationView(row)),
      csvHeader: CSV_COLUMNS.locations,
      csv: (row) => {
        const v: LocationView = locationView(row);
        return csvLine([
          v.external_key,
          v.name,
          v.description ?? '',
          String(v.is_active),
          v.parent_external_key ?? '',
          v.valid_from,
          v.valid_to ?? '',
          tagsCell(v.tags),
        ]);
      },
    },
    accept,
    now,
  );
}

const REPORT_COLUMNS = ['asset_id', 'asset_external_key', 'location_id', 'location_external_key', 'asset_last_seen', 'asset_deleted_at'];

/**
 * Whether the report export walks scan_positions in asset id order instead of an index, like
 * `walksTable` for assets: when no filter needs an index (locations, q, assets by id or key) and
 * the org holds at least half of the shard's live positions (scan_report_counts). By the org's
 * index SQLite sorted every position of the org in a temporary b-tree before the first line
 * (EXPLAIN QUERY PLAN: USE TEMP B-TREE FOR ORDER BY); the table is in asset id order already.
 */
export function walksReport(db: Db, orgId: number, filters: Omit<ReportFilters, 'sort' | 'limit' | 'offset'>): boolean {
  if (
    filters.location_id !== undefined ||
    filters.location_external_key !== undefined ||
    filters.asset_id !== undefined ||
    filters.asset_external_key !== undefined ||
    (filters.q !== undefined && filters.q !== '')
  ) {
    return false;
  }
  const counts = db
    .prepare('SELECT sum(live_positions) AS total, sum(CASE WHEN org_id = ? THEN live_positions ELSE 0 END) AS org FROM scan_report_counts')
    .get(orgId) as ShardShare;
  return holdsMostOfShard(counts);
}

/** The report export's statement; the bench's ceiling runs it too. */
export function reportExportSql(
  orgId: number,
  filters: Omit<ReportFilters, 'sort' | 'limit' | 'offset'>,
  now: number,
  walkTable = false,
): Knex.QueryBuilder {
  return reportBase(orgId, filters, now, true, walkTable)
    .leftJoin('locations as l', 'l.id', 'p.location_id')
    .select(
      sqlColumns([
        'p.asset_id',
        'a.external_key AS asset_external_key',
        'p.location_id',
        'CASE WHEN l.deleted_at IS NULL THEN l.external_key END AS location_external_key',
        'p.last_seen_at',
        'p.visit_id',
        'p.visit_read_count',
        'a.deleted_at AS asset_deleted_at',
      ]),
    )
    .orderBy('p.asset_id');
}

/** GET /api/v1/reports/asset-locations/export: the report's filters, by asset id. */
export function exportReport(shard: Shard, orgId: number, filters: ReportFilters, accept: string, now: number): Reply {
  const sql = reportExportSql(orgId, filters, now, walksReport(shard.reader, orgId, filters));
  const item = (r: ReportRow) => ({
    asset_id: r.asset_id,
    asset_external_key: r.asset_external_key,
    location_id: r.location_id,
    location_external_key: r.location_external_key,
    asset_last_seen: formatTimestamp(r.last_seen_at),
    asset_deleted_at: formatNullableTimestamp(r.asset_deleted_at),
  });
  return exportReply<ReportRow>(
    shard,
    orgId,
    {
      sql,
      ndjson: (row) => JSON.stringify(item(row)),
      csvHeader: REPORT_COLUMNS,
      csv: (row) => csvLine(Object.values(item(row)).map((v) => (v === null ? '' : String(v)))),
      // The re-read log as the export's snapshot holds it, laid over each row's last_seen_at.
      rowsAt: (db) => {
        const overlay = overlayOf(db);
        return (row) => laidOver(overlay, row);
      },
    },
    accept,
    now,
  );
}

/** Columns as raw SQL (they hold expressions and subqueries knex must not quote). */
const sqlColumns = (columns: string[]) => columns.map((column) => sqlBuilder.raw(column));
