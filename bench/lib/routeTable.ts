/**
 * trackd's own route table and handlers, opened outside the HTTP server over a DATA_DIR. The
 * in-process ceiling and the fastify baseline both run the very handlers (so the very SQL, the same
 * prepared statements and row mapping) that trackd serves, which is what makes their rates comparable.
 */
import { NO_CLIENT } from '../../src/console/session.js';
import { Authenticator, type Principal } from '../../src/auth/authenticator.js';
import { loadSigningKey } from '../../src/auth/signingKey.js';
import { loadConfig } from '../../src/config.js';
import { ControlPlane } from '../../src/control/controlPlane.js';
import type { FieldError } from '../../src/errors/catalog.js';
import { compileRoute, parseInputs, type CompiledRoute } from '../../src/http/steps.js';
import type { RequestContext, Route } from '../../src/http/route.js';
import { Router, type Method } from '../../src/http/router.js';
import { createLogger } from '../../src/log.js';
import { Metrics } from '../../src/ops/metrics.js';
import { allRoutes } from '../../src/routes.js';
import type { Services } from '../../src/services.js';
import { ShardRegistry } from '../../src/shards/registry.js';
import type { Shard } from '../../src/shards/shard.js';

export interface OpenRouteTable {
  routes: Route[];
  router: Router<Route>;
  authenticator: Authenticator;
  shards: ShardRegistry;
  /** Parses a request exactly as the HTTP server does and returns the handler's context (throws on 4xx). */
  context(route: Route, principal: Principal, rawParams: Record<string, string>, rawQuery: string, path: string): Promise<RequestContext>;
  close(): Promise<void>;
}

export async function openRouteTable(dataDir: string): Promise<OpenRouteTable> {
  const config = loadConfig({ ...process.env, DATA_DIR: dataDir, LOG_LEVEL: 'warn', TRACKD_ENV: 'production' });
  const control = await ControlPlane.open(dataDir);
  const logger = createLogger('warn');
  const authenticator = new Authenticator(control, await loadSigningKey(dataDir), config.TRACKD_ENV, logger);
  const shards = new ShardRegistry(dataDir, control);
  await shards.openAll(config.SHARDS);
  const services: Services = { config, logger, metrics: new Metrics(), control, shards, readiness: { storage: true, consumer: true } };
  const routes = allRoutes(services);
  const router = new Router<Route>();
  for (const route of routes) router.add(route.method, route.path, route);
  const compiled = new Map<Route, CompiledRoute>();

  return {
    routes,
    router,
    authenticator,
    shards,
    async context(route, principal, rawParams, rawQuery, path) {
      const errors: FieldError[] = [];
      let compiledRoute = compiled.get(route);
      if (compiledRoute === undefined) compiled.set(route, (compiledRoute = compileRoute(route)));
      const { params, query, textParams } = parseInputs(compiledRoute, rawParams, rawQuery, true, errors);
      if (errors.length > 0) throw new Error(`invalid request ${path}?${rawQuery}: ${JSON.stringify(errors)}`);
      const found = shards.forOrg(principal.orgId);
      if (found === undefined) throw new Error(`no shard for org ${principal.orgId}`);
      const shard: Shard = found instanceof Promise ? await found : found;
      return {
        requestId: 'bench',
        client: NO_CLIENT,
        // Read per call: the in-process loop reuses one context for many calls, as requests would not.
        get now() {
          return Date.now();
        },
        method: route.method,
        path,
        params,
        query,
        body: {},
        principal,
        shard,
        textParams,
        headers: { accept: '', idempotencyKey: '', contentType: '', lastEventId: '' },
      };
    },
    async close() {
      authenticator.close();
      await shards.closeAll();
      control.close();
    },
  };
}

/** Finds the route for `GET /path?query`; undefined when trackd has no such route. */
export function matchGet(
  table: OpenRouteTable,
  pathAndQuery: string,
): { route: Route; params: Record<string, string>; path: string; rawQuery: string } | undefined {
  const q = pathAndQuery.indexOf('?');
  const path = q < 0 ? pathAndQuery : pathAndQuery.slice(0, q);
  const rawQuery = q < 0 ? '' : pathAndQuery.slice(q + 1);
  const match = table.router.match(path);
  const route = match?.handlers.get('GET' as Method);
  if (match === undefined || route === undefined) return undefined;
  return { route, params: match.params, path, rawQuery };
}
