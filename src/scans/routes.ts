import { fieldError, throwIfInvalid, ApiError } from '../errors/catalog.js';
import { pagingParams, type QuerySpec, type SortTerm } from '../http/query.js';
import type { Route } from '../http/route.js';
import { ListEnvelope } from '../masterdata/fields.js';
import { assetHistory, assetExists } from './historyQuery.js';
import { assetLocationsReport, checkPairedFilters, indexedReport, type ReportFilters } from './reportQuery.js';
import { AssetLocationItem } from './schemas/assetLocationItem.js';
import { HistoryEvent } from './schemas/historyEvent.js';
import { Type } from '@sinclair/typebox';
import { lastSeq } from '../events/read.js';

/** The report's page, with the event sequence it reflects (additive). */
const ReportPage = Type.Object(
  {
    ...ListEnvelope(AssetLocationItem).properties,
    as_of_seq: Type.Integer({
      minimum: 0,
      description:
        "The organization's event sequence read before the page: every event up to it is reflected in the page (later ones may be too). Stream or page events from after=as_of_seq to follow on.",
    }),
  },
  { 'x-component': 'AssetLocationList' },
);

const TRACKING_READ = ['tracking:read'];

export const reportQuery: QuerySpec = {
  ...pagingParams(['asset_last_seen', 'asset_external_key', 'location_external_key'], '-asset_last_seen'),
  location_id: { kind: 'id', repeatable: true, description: 'Current location id (repeatable: any of).' },
  location_external_key: {
    kind: 'external_key',
    repeatable: true,
    description: 'Current location external_key (repeatable: any of); not with location_id.',
  },
  asset_id: { kind: 'id', repeatable: true, description: 'Asset id (repeatable: any of).' },
  asset_external_key: {
    kind: 'external_key',
    repeatable: true,
    description: 'Asset external_key (repeatable: any of); not with asset_id.',
  },
  include_deleted: { kind: 'boolean', default: false, description: 'Also report soft-deleted assets.' },
  q: { kind: 'q', description: 'Case-insensitive substring of the asset name, asset external_key or an active tag value.' },
};

const historyQuery: QuerySpec = {
  ...pagingParams(['event_observed_at'], '-event_observed_at'),
  from: { kind: 'timestamp', description: 'Earliest event_observed_at (inclusive).' },
  to: { kind: 'timestamp', description: 'Latest event_observed_at (inclusive).' },
};

/** The scan-derived read surface: current locations and movement history (scope tracking:read). */
export function scanRoutes(): Route[] {
  return [
    {
      method: 'GET',
      path: '/api/v1/reports/asset-locations',
      operationId: 'listAssetLocations',
      summary: 'Current location of every scanned asset (default sort: -asset_last_seen)',
      tag: 'Tracking',
      scopes: TRACKING_READ,
      query: reportQuery,
      responses: { 200: { description: 'One row per scanned asset', schema: ReportPage } },
      handler: async (ctx) => {
        checkPairedFilters(ctx.query);
        const filters = ctx.query as unknown as ReportFilters;
        // Read before the page, so that the page reflects at least every event up to it.
        const asOf = lastSeq(ctx.shard, ctx.principal.orgId);
        const page =
          (await indexedReport(ctx.shard, ctx.principal.orgId, filters, ctx.now)) ??
          (await assetLocationsReport(ctx.shard, ctx.principal.orgId, filters, ctx.now));
        return { status: 200, body: { ...page, as_of_seq: asOf } };
      },
    },
    {
      method: 'GET',
      path: '/api/v1/assets/{asset_id}/history',
      operationId: 'listAssetHistory',
      summary: 'Visits of an asset (default sort: -event_observed_at, newest first)',
      tag: 'Tracking',
      scopes: TRACKING_READ,
      query: historyQuery,
      responses: { 200: { description: 'History events (visits), newest first by default', schema: ListEnvelope(HistoryEvent) } },
      handler: (ctx) => {
        const from = ctx.query.from as number | undefined;
        const to = ctx.query.to as number | undefined;
        if (from !== undefined && to !== undefined && to < from)
          throwIfInvalid([fieldError('to', 'invalid_value', 'to must not be earlier than from')]);
        const assetId = ctx.params.asset_id;
        if (!assetExists(ctx.shard, ctx.principal.orgId, assetId)) throw ApiError.notFound(`asset ${assetId} not found`);
        const page = assetHistory(
          ctx.shard,
          assetId,
          { from, to, sort: ctx.query.sort as SortTerm[], limit: ctx.query.limit as number, offset: ctx.query.offset as number },
          ctx.now,
        );
        return { status: 200, body: page };
      },
    },
  ];
}
