import type { Route } from '../http/route.js';

/** The public reads the console's views call, by operationId. */
export const MIRRORED_READS = [
  'listAssets',
  'getAsset',
  'listAssetHistory',
  'listAssetLocations',
  'getLocation',
  'listLocations',
  'listLocationAncestors',
  'listEvents',
] as const;

/**
 * The same routes under /console/api/v1/…, authorised by the web session instead of a key: same
 * handler, query rules, SQL and answers, so the console shows exactly what the API would. The
 * public /api/v1 routes are untouched (they still refuse session tokens).
 */
export function mirroredReads(api: Route[]): Route[] {
  const wanted = new Set<string>(MIRRORED_READS);
  return api
    .filter((r) => r.method === 'GET' && wanted.has(r.operationId))
    .map((r) => ({ ...r, path: `/console${r.path}`, operationId: `console:${r.operationId}`, session: true, undocumented: true }));
}
