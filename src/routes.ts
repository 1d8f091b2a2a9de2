import type { Route } from './http/route.js';
import { assetRoutes } from './assets/routes.js';
import { locationRoutes } from './locations/routes.js';
import { opsRoutes } from './ops/routes.js';
import { orgRoutes } from './orgs/routes.js';
import { scanRoutes } from './scans/routes.js';
import { eventRoutes } from './events/routes.js';
import type { Services } from './services.js';

/** Every route of the service; each feature contributes its own list. */
export function allRoutes(services: Services): Route[] {
  const api: Route[] = [...orgRoutes(services), ...locationRoutes(), ...assetRoutes(), ...scanRoutes(), ...eventRoutes()];
  return [...api, ...opsRoutes(services, () => api)];
}
