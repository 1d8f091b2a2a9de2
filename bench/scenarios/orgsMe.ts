import type { ReadScenario } from '../lib/scenario.js';

/**
 * The authenticated route with no query: routing, cached token check, rate limit and JSON only.
 * Between the fixed-body ceiling and asset-by-id, it shows what auth costs and what the query costs.
 */
export const orgsMe: ReadScenario = {
  kind: 'read',
  name: 'orgs-me',
  title: 'GET /api/v1/orgs/me (auth, no query)',
  needs: ['GET /api/v1/orgs/me'],
  unit: 'req/s',
  paths: () => ['/api/v1/orgs/me'],
};
