import { randomIds, type ReadScenario } from '../lib/scenario.js';

export const assetById: ReadScenario = {
  kind: 'read',
  name: 'asset-by-id',
  title: 'GET /api/v1/assets/{id}, random asset',
  needs: ['GET /api/v1/assets/{asset_id}'],
  unit: 'req/s',
  paths: (ctx, count) => randomIds(ctx.dataset.assets, count).map((id) => `/api/v1/assets/${id}`),
};
