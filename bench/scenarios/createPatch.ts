import { randomIds, type WriteScenario } from '../lib/scenario.js';

/** Half creates (with a tag, unique keys), half merge-patches of random existing assets. */
export const createPatch: WriteScenario = {
  kind: 'write',
  name: 'create-patch',
  title: 'POST /api/v1/assets (with a tag) and PATCH /api/v1/assets/{id}, 50/50',
  needs: ['POST /api/v1/assets', 'PATCH /api/v1/assets/{asset_id}'],
  unit: 'req/s',
  requests: (ctx) => [
    {
      method: 'POST',
      paths: ['/api/v1/assets'],
      contentType: 'application/json',
      body: JSON.stringify({
        name: 'Bench asset {n}',
        external_key: 'BENCH-{n}',
        metadata: { source: 'bench' },
        tags: [{ tag_type: 'rfid', value: 'BENCH-{n}' }],
      }),
    },
    {
      method: 'PATCH',
      paths: randomIds(ctx.dataset.assets, 2_000).map((id) => `/api/v1/assets/${id}`),
      contentType: 'application/merge-patch+json',
      body: JSON.stringify({ description: 'patched by the bench {n}' }),
    },
  ],
};
