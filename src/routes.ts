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
import { eventRoutes } from './events/routes.js';
import { webhookRoutes } from './webhooks/routes.js';
import type { Services } from './services.js';
import { mirroredReads } from './console/mirror.js';
import { consoleRoutes } from './console/routes.js';
import type { SessionAuth } from './console/session.js';
import { staticRoutes } from './console/static.js';

/** Every route of the service; each feature contributes its own list. */
export function allRoutes(services: Services, sessions?: SessionAuth): Route[] {
  const api: Route[] = [
    ...orgRoutes(services),
    ...locationRoutes(),
    ...assetRoutes(),
    ...bulkRoutes('assets', assetBatchCommand, ['assets:write']),
    ...bulkRoutes('locations', locationBatchCommand, ['locations:write']),
    ...scanRoutes(),
    ...eventRoutes(),
    ...webhookRoutes(services),
    ...exportRoutes({
      assets: masterListParams(['external_key'], 'external_key'),
      locations: locationListQuery,
      report: reportQuery,
    }),
  ];
  const console = sessions === undefined ? [] : [...staticRoutes(), ...consoleRoutes(services, sessions), ...mirroredReads(api)];
  return [...api, ...opsRoutes(services, () => api), ...console];
}
