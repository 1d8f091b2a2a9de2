import type { Route } from './http/route.js';
import { assetRoutes } from './assets/routes.js';
import { assetBatchCommand } from './bulk/assetRows.js';
import { locationBatchCommand } from './bulk/locationRows.js';
import { bulkRoutes, exportRoutes } from './bulk/routes.js';
import { listQuery as locationListQuery } from './locations/schemas.js';
import { masterListParams } from './masterdata/filters.js';
import { reportQuery } from './scans/routes.js';
import { locationRoutes } from './locations/routes.js';
import { opsRoutes } from './ops/routes.js';
import { orgRoutes } from './orgs/routes.js';
import { scanRoutes } from './scans/routes.js';
import type { Services } from './services.js';

/** Every route of the service; each feature contributes its own list. */
export function allRoutes(services: Services): Route[] {
  const api: Route[] = [
    ...orgRoutes(services),
    ...locationRoutes(),
    ...assetRoutes(),
    ...bulkRoutes('assets', assetBatchCommand, ['assets:write']),
    ...bulkRoutes('locations', locationBatchCommand, ['locations:write']),
    ...scanRoutes(),
    ...exportRoutes({
      assets: masterListParams(['external_key'], 'external_key'),
      locations: locationListQuery,
      report: reportQuery,
    }),
  ];
  return [...api, ...opsRoutes(services, () => api)];
}
