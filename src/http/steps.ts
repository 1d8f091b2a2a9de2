/**
 * The steps every request goes through between the wire and its handler, as plain functions of
 * plain inputs: the uWS adapter (server.ts) calls them in order; tests, the in-process ceiling and
 * the baselines can call them without a socket. Each either returns what the next step needs or
 * throws the ApiError that answers the request.
 */
import { TextDecoder } from 'node:util';
import { ApiError, type FieldError } from '../errors/catalog.js';
import { Authenticator, authDetails, unauthorized, type Principal } from '../auth/authenticator.js';
import type { RowStamp } from '../shards/generations.js';
import type { ShardRegistry } from '../shards/registry.js';
import type { Shard } from '../shards/shard.js';
import { findDuplicateKey, hasLoneSurrogate } from '../wire/json.js';
import { parsePathId, parseQuery } from './query.js';
import type { RateLimiter, RateWindow } from './rateLimit.js';
import { ResponseCache } from './responseCache.js';
import type { PathParams, Reply, RequestContext, Route } from './route.js';
import type { Router, Method } from './router.js';
import { compileValidator, type BodyValidator } from '../wire/validation.js';

/** A route with what its requests need prepared once: the body validator and the path parameter names. */
export interface CompiledRoute {
  route: Route;
  validateBody: BodyValidator | undefined;
  paramNames: string[];
  metricRoute: string;
}

export function compileRoute(route: Route): CompiledRoute {
  // The OpenAPI document is built from this table: nothing undescribed may be served under /api/v1/.
  if (route.undocumented && route.path.startsWith('/api/v1/')) throw new Error(`route ${route.method} ${route.path} must be documented`);
  if (route.session && !route.path.startsWith('/console/'))
    throw new Error(`session route ${route.method} ${route.path} must be under /console/`);
  return {
    route,
    validateBody: route.body ? compileValidator(route.body.schema) : undefined,
    paramNames: [...route.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!),
    metricRoute: route.path,
  };
}

/** Step 1, routing: the route for the method and path (HEAD runs GET), else 404, or 405 with Allow. */
export function matchRoute(
  router: Router<CompiledRoute>,
  method: string,
  path: string,
): { compiled: CompiledRoute; rawParams: Record<string, string> } {
  const match = router.match(path);
  if (match === undefined) throw ApiError.notFound(`No resource at ${path}`);
  const compiled = match.handlers.get((method === 'HEAD' ? 'GET' : method) as Method);
  if (compiled === undefined) {
    const allow: string[] = [...match.handlers.keys()];
    if (allow.includes('GET')) allow.splice(allow.indexOf('GET') + 1, 0, 'HEAD');
    const allowText = allow.join(', ');
    throw new ApiError('method_not_allowed', `Method ${method} is not allowed; allowed methods: ${allowText}`, {
      headers: { Allow: allowText },
    });
  }
  return { compiled, rawParams: match.params };
}

/**
 * Step 2, authentication: undefined for routes without scopes; a principal from the token cache
 * (synchronously), or the promise of a first verification. 401 for a missing or malformed header.
 */
export function authenticate(
  authenticator: Authenticator,
  route: Route,
  authorization: string,
  hasApiKeyHeader: boolean,
  now: number,
): Principal | Promise<Principal> | undefined {
  if (route.scopes === undefined) return undefined;
  const token = Authenticator.bearerToken(authorization, hasApiKeyHeader);
  return authenticator.cached(token, now) ?? authenticator.verify(token);
}

/** Step 3, rate limiting (the one place it happens): takes one request from `key`'s window, or 429. */
export function takeRate(limiter: RateLimiter, key: string, now: number): RateWindow {
  const window = limiter.take(key, now);
  if (!limiter.allowed(window)) throw rateLimited(limiter, window, now);
  return window;
}

/** The 429 for a window over its budget; carries the window so that the answer shows its headers. */
export function rateLimited(limiter: RateLimiter, window: RateWindow, now: number): ApiError & { window: RateWindow } {
  const retryAfter = limiter.resetSeconds(window, now);
  const error = new ApiError(
    'rate_limited',
    `Rate limit of ${limiter.limit} requests per minute exceeded; retry after ${retryAfter} seconds`,
    {
      headers: { 'Retry-After': String(retryAfter) },
    },
  );
  return Object.assign(error, { window });
}

/** Step 4, scopes: 403 naming the scopes the key lacks. */
export function requireScopes(route: Route, principal: Principal): void {
  if (route.scopes === undefined) return;
  const missing = route.scopes.filter((s) => !principal.scopes.has(s));
  if (missing.length > 0) throw new ApiError('forbidden', `This API key lacks the required scope: ${missing.join(', ')}`);
}

/** Step 5, the shard of the caller's organization (org-scoped routes); 401 when the org no longer exists. */
export function resolveShard(shards: ShardRegistry, route: Route, principal: Principal | undefined): Shard | Promise<Shard> | undefined {
  if (principal === undefined || route.orgScoped === false) return undefined;
  const shard = shards.forOrg(principal.orgId);
  if (shard === undefined) throw unauthorized(authDetails.invalid);
  return shard;
}

/**
 * Step 6, path ids and query: parsed into `errors` (reported with the body's). The unknown-parameter
 * rule is the public interface's: a probe's or scraper's query never fails /healthz, /readyz, /metrics.
 */
export function parseInputs(
  compiled: CompiledRoute,
  rawParams: Record<string, string>,
  rawQuery: string,
  isApi: boolean,
  errors: FieldError[],
): { params: PathParams; query: Record<string, unknown>; textParams: Record<string, string> } {
  const params = {} as PathParams;
  const textParams: Record<string, string> = {};
  for (const name of compiled.paramNames) {
    if (compiled.route.textParams?.includes(name)) textParams[name] = rawParams[name] ?? '';
    else params[name] = parsePathId(name, rawParams[name] ?? '', errors);
  }
  const query = isApi ? parseQuery(rawQuery, compiled.route.query ?? {}, errors) : {};
  return { params, query, textParams };
}

/** Step 7a, the body's media type: 415 unless it is the route's. */
export function checkMediaType(route: Route, contentType: string): void {
  const mediaType = (contentType.split(';')[0] ?? '').trim().toLowerCase();
  if (route.upload !== undefined) {
    if (route.upload.contentTypes.includes(mediaType)) return;
    throw new ApiError('unsupported_media_type', `Content-Type must be one of: ${route.upload.contentTypes.join(', ')}`);
  }
  if (route.body === undefined) return;
  if (mediaType === route.body.contentType) return;
  throw new ApiError(
    'unsupported_media_type',
    route.method === 'PATCH'
      ? 'Content-Type must be application/merge-patch+json on PATCH operations'
      : 'Content-Type must be application/json',
  );
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Step 7b, decoding: the body as UTF-8 JSON whose top level is an object, else the bad_request of the interface. */
export function decodeBody(raw: Buffer, isPatch: boolean): Record<string, unknown> {
  let value: unknown;
  let text: string;
  try {
    text = utf8.decode(raw);
    value = JSON.parse(text);
  } catch {
    throw new ApiError('bad_request', 'Request body is not valid JSON');
  }
  if (typeof value === 'object' && value !== null) {
    const duplicate = findDuplicateKey(text);
    if (duplicate !== undefined)
      throw new ApiError('bad_request', `Request body is not valid JSON: duplicate key ${JSON.stringify(duplicate)}`);
    if (hasLoneSurrogate(text, value))
      throw new ApiError('bad_request', 'Request body is not valid JSON: a string holds an unpaired UTF-16 surrogate escape');
  }
  if (value === null && isPatch) throw new ApiError('bad_request', 'Request body must be a JSON object (RFC 7396)');
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ApiError('bad_request', 'Request body could not be decoded as the expected type');
  }
  return value as Record<string, unknown>;
}

/**
 * Step 8, validation: the schema, the route's extra checks, and (only when something already
 * failed, so that every failure is reported together) the checks that need the organization's data.
 */
export async function validateBody(
  compiled: CompiledRoute,
  body: Record<string, unknown>,
  errors: FieldError[],
  now: number,
  scope: { shard: Shard | Promise<Shard> | undefined; orgId: number | undefined; params: PathParams },
): Promise<void> {
  const route = compiled.route;
  if (route.body === undefined) return;
  errors.push(...compiled.validateBody!(body));
  if (route.body.check) errors.push(...route.body.check(body, now));
  if (errors.length > 0 && route.body.resolve && scope.shard !== undefined && scope.orgId !== undefined) {
    const shard = scope.shard instanceof Promise ? await scope.shard : scope.shard;
    const failed = new Set(errors.map((e) => e.field));
    for (const e of route.body.resolve(body, { shard, orgId: scope.orgId, params: scope.params }, failed)) {
      if (!errors.some((x) => x.field === e.field && x.code === e.code)) errors.push(e);
    }
  }
}

/** Step 9, the response cache of a cacheable read: a hit's text, or where to file the answer. */
export function cacheLookup(
  route: Route,
  shard: Shard | Promise<Shard> | undefined,
  maxBytes: number,
  orgId: number,
  id: number,
): { hit: string } | { cache: ResponseCache; stamp: RowStamp } | undefined {
  if (route.cacheable === undefined || maxBytes <= 0 || shard === undefined || shard instanceof Promise) return undefined;
  const cache = ResponseCache.of(shard, maxBytes);
  const hit = cache.get(orgId, route.cacheable, id);
  // The stamp is taken before the handler reads the row: a write committed meanwhile leaves it stale.
  return hit !== undefined ? { hit } : { cache, stamp: cache.stamp(route.cacheable, id) };
}

/** Step 10, the handler; a synchronous 200 of a cacheable read is serialized and filed. */
export async function callHandler(
  route: Route,
  ctx: RequestContext,
  filing: { cache: ResponseCache; stamp: RowStamp; orgId: number; id: number } | undefined,
): Promise<Reply> {
  let reply = route.handler(ctx);
  if (reply instanceof Promise) return reply;
  if (filing !== undefined && reply.status === 200 && reply.text === undefined && reply.headers === undefined) {
    reply = { status: 200, text: JSON.stringify(reply.body) };
    filing.cache.set(filing.orgId, route.cacheable!, filing.id, reply.text!, filing.stamp);
  }
  return reply;
}
