import { randomIds, type ReadScenario } from '../lib/scenario.js';

const paths: ReadScenario['paths'] = (ctx, count) => randomIds(ctx.dataset.assets, count).map((id) => `/api/v1/assets/${id}`);

export const assetById: ReadScenario = {
  kind: 'read',
  name: 'asset-by-id',
  title: 'GET /api/v1/assets/{id}, random asset',
  needs: ['GET /api/v1/assets/{asset_id}'],
  unit: 'req/s',
  paths,
};

/** The same reads with the response cache off: every request runs the point query and builds the JSON. */
export const assetByIdUncached: ReadScenario = {
  ...assetById,
  name: 'asset-by-id-uncached',
  title: 'GET /api/v1/assets/{id}, random asset, RESPONSE_CACHE_MB=0',
  env: { RESPONSE_CACHE_MB: '0' },
};
