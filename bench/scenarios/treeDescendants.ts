import { randomOf, type ReadScenario } from '../lib/scenario.js';

/** A page of a large subtree (depth-first preorder), and the whole deep branch from its root. */
export const treeDescendants: ReadScenario = {
  kind: 'read',
  name: 'tree-descendants',
  title: 'GET /api/v1/locations/{id}/descendants, large subtrees and the deep branch',
  needs: ['GET /api/v1/locations/{location_id}/descendants'],
  unit: 'req/s',
  paths(ctx, count) {
    const roots = [...ctx.dataset.subtreeRoots, ctx.dataset.deepBranch[0]];
    return randomOf(roots, count).map((id) => `/api/v1/locations/${id}/descendants?limit=50`);
  },
};
