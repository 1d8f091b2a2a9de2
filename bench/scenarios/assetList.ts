import { assetKey } from '../dataset/sizes.js';
import { randomIds, type ReadScenario } from '../lib/scenario.js';

const WORDS = ['pallet', 'forklift', 'cage', 'scanner', 'blue', 'steel'];

/** A page of the asset list with the filters integrators use: active flag, q, keys, a sort, offsets. */
export const assetList: ReadScenario = {
  kind: 'read',
  name: 'asset-list',
  title: 'GET /api/v1/assets with filters (is_active, q, external_key, sort, offset)',
  needs: ['GET /api/v1/assets'],
  unit: 'req/s',
  paths(ctx, count) {
    const maxOffset = Math.min(ctx.dataset.assets.count - 50, 1_000);
    return Array.from({ length: count }, (_, i) => {
      const offset = Math.floor(Math.random() * maxOffset);
      switch (i % 4) {
        case 0:
          return `/api/v1/assets?is_active=true&limit=50&offset=${offset}`;
        case 1:
          return `/api/v1/assets?q=${WORDS[i % WORDS.length]}&limit=20`;
        case 2:
          return `/api/v1/assets?${randomIds(ctx.dataset.assets, 3)
            .map((id) => `external_key=${assetKey(id)}`)
            .join('&')}`;
        default:
          return `/api/v1/assets?sort=-updated_at&limit=50&offset=${offset}`;
      }
    });
  },
};
