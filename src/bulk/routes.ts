import { Type } from '@sinclair/typebox';
import type { Route } from '../http/route.js';
import type { QuerySpec } from '../http/query.js';
import { Nullable, Timestamp } from '../masterdata/fields.js';
import type { ShardCommand } from '../shards/commands.js';
import type { BatchArgs } from './batch.js';
import { checkPairedFilters, type ReportFilters } from '../scans/reportQuery.js';
import { exportAssets, exportLocations, exportReport } from './export.js';
import { FORMATS, startImport } from './importer.js';
import { getJob, type BatchOutcome, type BulkKind } from './jobs.js';
import { BULK_LIMITS } from './limits.js';
import { CSV_COLUMNS } from './rowSource.js';

const importQuery: QuerySpec = {
  mode: {
    kind: 'enum',
    values: ['create', 'upsert'],
    default: 'create',
    description:
      'create: a row whose external_key a live row holds fails (conflict). upsert: rows are matched by external_key (required): created when absent, changed when present, left alone (no updated_at bump) when equal.',
  },
  dry_run: { kind: 'boolean', default: false, description: 'Judge every row against the data and count what would happen; write nothing.' },
  atomic: {
    kind: 'boolean',
    default: false,
    description: `All or nothing: any failed row and no row is applied (one transaction; at most ${BULK_LIMITS.maxHeldRows} rows).`,
  },
};

const ImportBody = Type.String({
  'x-component': 'BulkImportBody',
  description:
    'CSV with a header row (text/csv; an empty cell is a field not given; tags as type:value pairs joined by ;) or NDJSON (application/x-ndjson: one create body per line).',
});

export const BulkAccepted = Type.Object(
  {
    status: Type.Unsafe<'accepted'>({ type: 'string', enum: ['accepted'] }),
    job_id: Type.String(),
    status_url: Type.String(),
  },
  { 'x-component': 'BulkAccepted' },
);

const RowErrorView = Type.Object(
  {
    row: Type.Integer({ description: '1-based data row (a CSV header is not a row; blank lines are not rows).' }),
    field: Type.String(),
    error: Type.String({
      description: 'A fields[] code of the interface, or conflict (key or tag held elsewhere, or repeated in the file).',
    }),
    message: Type.String(),
  },
  { 'x-component': 'BulkRowError' },
);

const Count = Type.Integer({ minimum: 0 });

export const BulkJob = Type.Object(
  {
    job_id: Type.String(),
    kind: Type.String({ enum: ['assets', 'locations'] }),
    status: Type.String({ enum: ['pending', 'processing', 'completed', 'failed'] }),
    mode: Type.String({ enum: ['create', 'upsert'] }),
    dry_run: Type.Boolean(),
    atomic: Type.Boolean(),
    format: Type.String({ enum: ['csv', 'ndjson'] }),
    total_rows: Nullable(Type.Integer({ minimum: 0, description: 'Rows of the body; null until it was read to its end.' })),
    processed_rows: Count,
    failed_rows: Count,
    created: Count,
    updated: Count,
    unchanged: Count,
    tags_created: Count,
    applied_through_row: Type.Integer({
      minimum: 0,
      description: 'Every row up to this one was judged (applied unless listed in errors), none after it was.',
    }),
    detail: Nullable(Type.String()),
    errors: Type.Array(RowErrorView),
    errors_truncated: Type.Boolean(),
    created_at: Timestamp,
    updated_at: Timestamp,
    completed_at: Nullable(Timestamp),
    expires_at: Nullable(Timestamp),
  },
  { 'x-component': 'BulkJob' },
);

const NOUN: Record<BulkKind, string> = { assets: 'Assets', locations: 'Locations' };

/** POST /api/v1/{kind}/bulk and GET /api/v1/{kind}/bulk/{job_id}: the kind's write scope for both. */
export function bulkRoutes(kind: BulkKind, command: ShardCommand<BatchArgs, BatchOutcome>, scopes: string[]): Route[] {
  const base = `/api/v1/${kind}/bulk`;
  const noun = NOUN[kind];
  return [
    {
      method: 'POST',
      path: base,
      operationId: `import${noun}`,
      summary: `Import ${kind} in one job: CSV (header row; columns ${CSV_COLUMNS[kind].join(', ')}) or NDJSON (one create body per line); 202 with the job's status_url`,
      tag: noun,
      scopes,
      query: importQuery,
      upload: {
        contentTypes: Object.keys(FORMATS),
        maxBytes: BULK_LIMITS.maxBodyBytes,
        description: `CSV or NDJSON, up to ${BULK_LIMITS.maxBodyBytes} bytes, read as a stream. An Idempotency-Key header sent again answers the job it started.`,
        schema: ImportBody,
      },
      responses: {
        202: {
          description: 'The job was accepted (or, for a repeated Idempotency-Key, the job it started)',
          schema: BulkAccepted,
          headers: { Location: { description: 'The job status URL', schema: Type.String() } },
        },
      },
      handler: (ctx) => startImport(ctx, kind, command),
    },
    {
      method: 'GET',
      path: `${base}/{job_id}`,
      operationId: `get${noun}ImportJob`,
      summary: `Status of an import job of ${kind}: counts, per-row errors, what was applied`,
      tag: noun,
      scopes,
      textParams: ['job_id'],
      responses: { 200: { description: 'The job', schema: Type.Object({ data: BulkJob }, { 'x-component': 'BulkJobResponse' }) } },
      handler: (ctx) => ({ status: 200, body: { data: getJob(ctx.shard, ctx.principal.orgId, kind, ctx.textParams.job_id!) } }),
    },
  ];
}

const ExportBody = Type.String({
  'x-component': 'ExportBody',
  description:
    'NDJSON (application/x-ndjson, the default): one list item per line. CSV (Accept: text/csv): a header row, then one row per item; the asset and location exports use the import columns, so an exported file imports back (mode=upsert) as a no-op.',
});

const EXPORT_HEADERS = {
  'Trackd-Export-As-Of': {
    description: 'The instant the currently-effective rule was judged at (the export is one read transaction).',
    schema: Type.String(),
  },
  'Trackd-Event-Sequence': {
    description:
      'The event-log sequence the export reflects: every event up to it is in the export and none after it; read events after it to follow on.',
    schema: Type.String(),
  },
};

/** The list parameters of an export: the filters, without paging or sort (rows come by id). */
function exportQuery(list: QuerySpec): QuerySpec {
  const { limit: _limit, offset: _offset, sort: _sort, ...filters } = list;
  return filters;
}

function exportRoute(
  path: string,
  operationId: string,
  tag: string,
  scopes: string[],
  query: QuerySpec,
  summary: string,
  handler: Route['handler'],
): Route {
  return {
    method: 'GET',
    path,
    operationId,
    summary,
    tag,
    scopes,
    query: exportQuery(query),
    responses: {
      200: {
        description: 'Every matching row, streamed (chunked), from one point in time',
        streamed: { mediaTypes: ['application/x-ndjson', 'text/csv'], schema: ExportBody },
        headers: EXPORT_HEADERS,
      },
    },
    handler,
  };
}

/** GET /api/v1/assets/export, /locations/export and /reports/asset-locations/export. */
export function exportRoutes(lists: { assets: QuerySpec; locations: QuerySpec; report: QuerySpec }): Route[] {
  return [
    exportRoute(
      '/api/v1/assets/export',
      'exportAssets',
      'Assets',
      ['assets:read'],
      lists.assets,
      'Every asset the list filters select, as NDJSON or CSV (Accept)',
      (ctx) => exportAssets(ctx.shard, ctx.principal.orgId, ctx.query, ctx.headers.accept, ctx.now),
    ),
    exportRoute(
      '/api/v1/locations/export',
      'exportLocations',
      'Locations',
      ['locations:read'],
      lists.locations,
      'Every location the list filters select, as NDJSON or CSV (Accept)',
      (ctx) => {
        checkPairedFilters(ctx.query, [['parent_id', 'parent_external_key']]);
        return exportLocations(ctx.shard, ctx.principal.orgId, ctx.query, ctx.headers.accept, ctx.now);
      },
    ),
    exportRoute(
      '/api/v1/reports/asset-locations/export',
      'exportAssetLocations',
      'Tracking',
      ['tracking:read'],
      lists.report,
      'The current location of every scanned asset the report filters select, as NDJSON or CSV (Accept)',
      (ctx) => {
        checkPairedFilters(ctx.query);
        return exportReport(ctx.shard, ctx.principal.orgId, ctx.query as unknown as ReportFilters, ctx.headers.accept, ctx.now);
      },
    ),
  ];
}
