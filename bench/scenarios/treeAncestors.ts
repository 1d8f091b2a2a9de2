import { randomOf, type ReadScenario } from '../lib/scenario.js';

/** Breadcrumb of a node deep in the tree: the whole parent chain. */
export const treeAncestors: ReadScenario = {
  kind: 'read',
  name: 'tree-ancestors',
  title: 'GET /api/v1/locations/{id}/ancestors on the deep branch',
  needs: ['GET /api/v1/locations/{location_id}/ancestors'],
  unit: 'req/s',
  paths(ctx, count) {
    const deepHalf = ctx.dataset.deepBranch.slice(Math.floor(ctx.dataset.deepBranch.length / 2));
    return randomOf(deepHalf, count).map((id) => `/api/v1/locations/${id}/ancestors`);
  },
};
