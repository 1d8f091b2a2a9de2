import { randomIds, type ReadScenario } from '../lib/scenario.js';

/** One asset's movement history, first page, random scanned asset. */
export const history: ReadScenario = {
  kind: 'read',
  name: 'history',
  title: 'GET /api/v1/assets/{id}/history, random scanned asset',
  needs: ['GET /api/v1/assets/{asset_id}/history'],
  unit: 'req/s',
  paths: (ctx, count) => randomIds(ctx.dataset.assets, count).map((id) => `/api/v1/assets/${id}/history?limit=50`),
};
