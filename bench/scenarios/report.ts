import { randomOf, type ReadScenario } from '../lib/scenario.js';

const REPORT = 'GET /api/v1/reports/asset-locations';

/** The asset-locations report in its default sort (-asset_last_seen), pages at offsets up to 10,000. */
export const report: ReadScenario = {
  kind: 'read',
  name: 'report',
  title: 'GET /api/v1/reports/asset-locations, default sort, offsets 0..10,000',
  needs: [REPORT],
  unit: 'req/s',
  paths(ctx, count) {
    const maxOffset = Math.max(1, Math.min(10_000, ctx.dataset.scannedAssets - 50));
    return Array.from({ length: count }, () => `/api/v1/reports/asset-locations?limit=50&offset=${Math.floor(Math.random() * maxOffset)}`);
  },
};

/** The report filtered to one location (what a dock screen polls). */
export const reportByLocation: ReadScenario = {
  kind: 'read',
  name: 'report-by-location',
  title: 'GET /api/v1/reports/asset-locations?location_id=..., random scan location',
  needs: [REPORT],
  unit: 'req/s',
  paths: (ctx, count) =>
    randomOf(ctx.dataset.scanLocations, count).map((l) => `/api/v1/reports/asset-locations?location_id=${l.id}&limit=50`),
};

/** What offset paging costs: random offsets over the whole report (reported, not a target). */
export const reportDeepOffset: ReadScenario = {
  kind: 'read',
  name: 'report-any-offset',
  title: 'GET /api/v1/reports/asset-locations, random offsets over the whole report',
  needs: [REPORT],
  unit: 'req/s',
  paths(ctx, count) {
    const maxOffset = Math.max(1, ctx.dataset.scannedAssets - 50);
    return Array.from({ length: count }, () => `/api/v1/reports/asset-locations?limit=50&offset=${Math.floor(Math.random() * maxOffset)}`);
  },
};
