import { TextDecoder } from 'node:util';
import uWS from 'uWebSockets.js';
import { monotonicFactory } from 'ulid';
import { ApiError, type FieldError } from '../errors/catalog.js';
import { asApiError, errorEnvelope } from '../errors/envelope.js';
import { Authenticator, authDetails, unauthorized, type Principal } from '../auth/authenticator.js';
import type { ShardRegistry } from '../shards/registry.js';
import type { StorageHealth } from '../storage/health.js';
import type { Shard } from '../shards/shard.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../ops/metrics.js';
import type { Cell, HistogramSeries } from '../ops/metrics.js';
import { RateLimiter, type RateWindow, type rateLimitBuffers } from './rateLimit.js';
import { Router, type Method } from './router.js';
import { parsePathId, parseQuery } from './query.js';
import { compileValidator, type BodyValidator } from './validation.js';
import { ResponseCache } from './responseCache.js';
import type { RowStamp } from '../shards/generations.js';
import { findDuplicateKey, hasLoneSurrogate } from './json.js';
import type { Reply, RequestContext, Route } from './route.js';
import { systemClock, type Clock } from '../clock.js';

/** Largest request body accepted (1 MiB); larger bodies get 413 payload_too_large. */
export const MAX_BODY_BYTES = 1024 * 1024;
/**
 * A body must arrive in full within this time of the request head, else 408 request_timeout and the
 * connection is closed: a client trickling its body holds no buffer or socket for long. (uWS itself
 * drops a request still incomplete after about 10 s, silently; this answers first.)
 */
export const BODY_READ_TIMEOUT_MS = 5000;

const STATUS_TEXT: Record<number, string> = {
  200: '200 OK',
  201: '201 Created',
  204: '204 No Content',
  301: '301 Moved Permanently',
  400: '400 Bad Request',
  401: '401 Unauthorized',
  403: '403 Forbidden',
  404: '404 Not Found',
  405: '405 Method Not Allowed',
  408: '408 Request Timeout',
  409: '409 Conflict',
  413: '413 Payload Too Large',
  415: '415 Unsupported Media Type',
  422: '422 Unprocessable Entity',
  429: '429 Too Many Requests',
  500: '500 Internal Server Error',
  503: '503 Service Unavailable',
};

const utf8 = new TextDecoder('utf-8', { fatal: true });
// Math.random, not the default webcrypto PRNG (16 one-byte getRandomValues calls per new millisecond):
// request ids need uniqueness, not secrecy, and the default cost 15% of an asset read (bench profile).
const nextUlid = monotonicFactory(Math.random);

interface CompiledRoute {
  route: Route;
  validateBody: BodyValidator | undefined;
  paramNames: string[];
  metricRoute: string;
}

interface Pending {
  res: uWS.HttpResponse;
  aborted: boolean;
  done: boolean;
  method: string;
  path: string;
  /** Public surface (under /api/, and the bare OpenAPI redirects of interface 1.3): rate limited, X-RateLimit-* headers. */
  isApi: boolean;
  requestId: string;
  rate: RateWindow | undefined;
  started: number;
  route: string;
  /** Settles a pending body read when the client goes away. */
  abortBody: (() => void) | undefined;
}

interface RequestSeries {
  count: Cell;
  latency: HistogramSeries;
}


export interface HttpServerOptions {
  host: string;
  port: number;
  logger: Logger;
  metrics: Metrics;
  authenticator: Authenticator;
  rateLimitPerMinute: number;
  shards: ShardRegistry;
  storageHealth?: StorageHealth;
  /** Budget of each shard's response cache (routes marked `cacheable`); 0 turns it off. */
  responseCacheBytes: number;
  /** Where the server reads the time (default: the system clock). */
  clock?: Clock;
  /** The process's shared rate-limit table (every HTTP thread takes from the same budgets). */
  rateLimitBuffers?: ReturnType<typeof rateLimitBuffers>;
}

/**
 * The HTTP front end: one uWS catch-all handler, our own router (so 404 and 405 with Allow are ours),
 * one request wrapper that copies what it needs out of `req`, registers onAborted first, reads the
 * body into a bounded buffer, corks every write and never touches `res` after an abort.
 */
export class HttpServer {
  private readonly app = uWS.App();
  private readonly router = new Router<CompiledRoute>();
  private readonly limiter: RateLimiter;
  private listenSocket: uWS.us_listen_socket | undefined;
  private inFlight = 0;
  private draining = false;
  private drained: (() => void) | undefined;
  /** route -> method -> status -> metric series, so finishing a request does no label formatting. */
  private readonly series = new Map<string, Map<string, Map<number, RequestSeries>>>();
  port = 0;

  private readonly limitText: string;
  private readonly clock: Clock;

  constructor(private readonly options: HttpServerOptions) {
    this.limiter = new RateLimiter(options.rateLimitPerMinute, options.rateLimitBuffers);
    this.limitText = String(options.rateLimitPerMinute);
    this.clock = options.clock ?? systemClock;
    this.app.any('/*', (res, req) => this.onRequest(res, req));
  }

  addRoutes(routes: Route[]): void {
    for (const route of routes) {
      // The OpenAPI document is built from this table: nothing undescribed may be served under /api/v1/.
      if (route.undocumented && route.path.startsWith('/api/v1/')) throw new Error(`route ${route.method} ${route.path} must be documented`);
      const paramNames = [...route.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      this.router.add(route.method, route.path, {
        route,
        validateBody: route.body ? compileValidator(route.body.schema) : undefined,
        paramNames,
        metricRoute: route.path,
      });
    }
  }

  /** Listens on the configured port, or on `port` (another thread's, shared through SO_REUSEPORT). */
  listen(port = this.options.port): Promise<number> {
    return new Promise((resolve, reject) => {
      this.app.listen(this.options.host, port, (socket) => {
        if (!socket) return reject(new Error(`cannot listen on ${this.options.host}:${port}`));
        this.listenSocket = socket;
        this.port = uWS.us_socket_local_port(socket);
        resolve(this.port);
      });
    });
  }

  /** Stops accepting, lets in-flight requests finish (up to `timeoutMs`), then closes idle connections. */
  async stop(timeoutMs = 8000): Promise<void> {
    this.draining = true;
    if (this.listenSocket) uWS.us_listen_socket_close(this.listenSocket);
    this.listenSocket = undefined;
    if (this.inFlight > 0) {
      await new Promise<void>((resolve) => {
        this.drained = resolve;
        setTimeout(resolve, timeoutMs).unref();
      });
    }
    // app.close() drops every socket at once, unsent bytes included: give the last responses a turn
    // of the event loop to reach the kernel first (they close their own connections while draining).
    await new Promise((resolve) => setTimeout(resolve, 50));
    (this.app as unknown as { close?: () => void }).close?.();
  }

  private onRequest(res: uWS.HttpResponse, req: uWS.HttpRequest): void {
    const started = performance.now();
    const method = req.getCaseSensitiveMethod();
    const path = req.getUrl();
    const rawQuery = req.getQuery() ?? '';
    const requestId = req.getHeader('x-request-id') || nextUlid();
    const authorization = req.getHeader('authorization');
    const hasApiKeyHeader = req.getHeader('x-api-key') !== '';
    const contentType = req.getHeader('content-type');
    const contentLength = req.getHeader('content-length');

    const p: Pending = {
      res,
      aborted: false,
      done: false,
      method,
      path,
      isApi: path.startsWith('/api/') || path === '/openapi.json' || path === '/openapi.yaml',
      requestId,
      rate: undefined,
      started,
      route: 'unmatched',
      abortBody: undefined,
    };
    res.onAborted(() => {
      p.aborted = true;
      p.abortBody?.();
      this.finish(p, 499);
    });
    this.inFlight++;

    if (this.draining) return this.fail(p, new ApiError('service_unavailable', 'The server is shutting down'), true);

    const match = this.router.match(path);
    if (match === undefined) return this.fail(p, ApiError.notFound(`No resource at ${path}`));
    const isHead = method === 'HEAD';
    const compiled = match.handlers.get((isHead ? 'GET' : method) as Method);
    if (compiled === undefined) {
      const allow: string[] = [...match.handlers.keys()];
      if (allow.includes('GET')) allow.splice(allow.indexOf('GET') + 1, 0, 'HEAD');
      const allowText = allow.join(', ');
      return this.fail(p, new ApiError('method_not_allowed', `Method ${method} is not allowed; allowed methods: ${allowText}`, { headers: { Allow: allowText } }));
    }
    p.route = compiled.metricRoute;
    const route = compiled.route;

    let body: Promise<Buffer | undefined> | undefined;
    if (route.body !== undefined) {
      const declared = contentLength === '' ? undefined : Number(contentLength);
      if (declared !== undefined && declared > MAX_BODY_BYTES) return this.fail(p, tooLarge(), true);
      body = this.readBody(p);
    }

    let principal: Principal | undefined;
    try {
      if (route.scopes !== undefined) {
        const token = Authenticator.bearerToken(authorization, hasApiKeyHeader);
        principal = this.options.authenticator.cached(token, this.clock.now());
        if (principal === undefined) {
          const verifying = this.options.authenticator.verify(token);
          void this.continueAsync(p, compiled, verifying, rawQuery, contentType, body, isHead, match.params);
          return;
        }
      }
    } catch (err) {
      return this.fail(p, err);
    }
    void this.run(p, compiled, principal, rawQuery, contentType, body, isHead, match.params);
  }

  private async continueAsync(
    p: Pending,
    compiled: CompiledRoute,
    verifying: Promise<Principal>,
    rawQuery: string,
    contentType: string,
    body: Promise<Buffer | undefined> | undefined,
    isHead: boolean,
    params: Record<string, string>,
  ): Promise<void> {
    let principal: Principal;
    try {
      principal = await verifying;
    } catch (err) {
      return this.fail(p, err);
    }
    return this.run(p, compiled, principal, rawQuery, contentType, body, isHead, params);
  }

  private async run(
    p: Pending,
    compiled: CompiledRoute,
    principal: Principal | undefined,
    rawQuery: string,
    contentType: string,
    bodyPromise: Promise<Buffer | undefined> | undefined,
    isHead: boolean,
    rawParams: Record<string, string>,
  ): Promise<void> {
    const route = compiled.route;
    try {
      if (p.isApi && principal !== undefined) {
        p.rate = this.limiter.take(principal.apiKeyId, this.clock.now());
        if (!this.limiter.allowed(p.rate)) throw this.rateLimited(p.rate);
      }
      if (principal !== undefined && route.scopes !== undefined) {
        for (const scope of route.scopes) {
          if (!principal.scopes.has(scope)) {
            const missing = route.scopes.filter((s) => !principal.scopes.has(s));
            throw new ApiError('forbidden', `This API key lacks the required scope: ${missing.join(', ')}`);
          }
        }
      }
      let shard: Shard | Promise<Shard> | undefined;
      if (principal !== undefined && route.orgScoped !== false) {
        shard = this.options.shards.forOrg(principal.orgId);
        if (shard === undefined) throw unauthorized(authDetails.invalid);
      }
      const errors: FieldError[] = [];
      const params: Record<string, number> = {};
      for (const name of compiled.paramNames) params[name] = parsePathId(name, rawParams[name], errors);
      // The unknown-parameter rule is the public interface's; a probe's or scraper's query never fails /healthz, /readyz, /metrics.
      const query = p.isApi ? parseQuery(rawQuery, route.query ?? {}, errors) : {};
      let body: Record<string, unknown> = {};
      if (route.body !== undefined && bodyPromise !== undefined) {
        const mediaType = contentType.split(';')[0].trim().toLowerCase();
        if (mediaType !== route.body.contentType) {
          throw new ApiError(
            'unsupported_media_type',
            route.method === 'PATCH'
              ? 'Content-Type must be application/merge-patch+json on PATCH operations'
              : 'Content-Type must be application/json',
          );
        }
        const raw = await bodyPromise;
        if (raw === undefined) return; // already answered (413, 408) or the client is gone
        body = parseJsonObject(raw, route.method === 'PATCH');
        errors.push(...compiled.validateBody!(body));
        if (route.body.check) errors.push(...route.body.check(body, this.clock.now()));
        if (errors.length > 0 && route.body.resolve && shard !== undefined) {
          const scope = { shard: shard instanceof Promise ? await shard : shard, orgId: principal!.orgId, params };
          const failed = new Set(errors.map((e) => e.field));
          for (const e of route.body.resolve(body, scope, failed)) if (!errors.some((x) => x.field === e.field && x.code === e.code)) errors.push(e);
        }
      }
      if (errors.length > 0) throw ApiError.validation(errors);
      const cache =
        route.cacheable !== undefined && this.options.responseCacheBytes > 0 && shard !== undefined && !(shard instanceof Promise)
          ? ResponseCache.of(shard, this.options.responseCacheBytes)
          : undefined;
      const cachedId = cache === undefined ? 0 : params[compiled.paramNames[0]];
      let stamp: RowStamp | undefined;
      if (cache !== undefined) {
        const text = cache.get(principal!.orgId, route.cacheable!, cachedId);
        if (text !== undefined) return this.send(p, { status: 200, text }, isHead);
        stamp = cache.stamp(route.cacheable!, cachedId);
      }
      const ctx: RequestContext = {
        requestId: p.requestId,
        now: this.clock.now(),
        method: route.method,
        path: p.path,
        params,
        query,
        body,
        principal: principal as Principal,
        shard: (shard instanceof Promise ? await shard : shard) as Shard,
      };
      let reply = route.handler(ctx);
      if (reply instanceof Promise) reply = await reply;
      else if (cache !== undefined && reply.status === 200 && reply.text === undefined && reply.headers === undefined) {
        reply = { status: 200, text: JSON.stringify(reply.body) };
        cache.set(principal!.orgId, route.cacheable!, cachedId, reply.text!, stamp!);
      }
      this.send(p, reply, isHead);
    } catch (err) {
      this.fail(p, err);
    }
  }

  /**
   * Resolves with the whole body, or undefined once the request was answered or abandoned (over the
   * limit: 413; not in time: 408; client gone). Never rejects: the request may already have been
   * answered (401, 403, 400 on the query) and then nobody awaits it.
   */
  private readBody(p: Pending): Promise<Buffer | undefined> {
    return new Promise((resolve) => {
      const chunks: Buffer[] = [];
      let size = 0;
      const stop = (answer: ApiError | undefined, body?: Buffer) => {
        clearTimeout(timer);
        p.abortBody = undefined;
        chunks.length = 0;
        if (answer !== undefined) this.fail(p, answer, true);
        resolve(body);
      };
      const timer = setTimeout(
        () => stop(new ApiError('request_timeout', `Request body not received within ${BODY_READ_TIMEOUT_MS / 1000} seconds`)),
        BODY_READ_TIMEOUT_MS,
      );
      p.abortBody = () => stop(undefined);
      p.res.onData((chunk, isLast) => {
        if (p.done || p.abortBody === undefined) return;
        size += chunk.byteLength;
        if (size > MAX_BODY_BYTES) return stop(tooLarge());
        // uWS neuters the chunk when this callback returns: copy it.
        chunks.push(Buffer.from(new Uint8Array(chunk)));
        if (isLast) stop(undefined, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
      });
    });
  }

  private rateLimited(w: RateWindow): ApiError {
    const retryAfter = this.limiter.resetSeconds(w, this.clock.now());
    return new ApiError('rate_limited', `Rate limit of ${this.limiter.limit} requests per minute exceeded; retry after ${retryAfter} seconds`, {
      headers: { 'Retry-After': String(retryAfter) },
    });
  }

  private fail(p: Pending, err: unknown, closeConnection = false): void {
    const apiError = this.options.storageHealth?.report(err) ?? asApiError(err);
    if (apiError.status === 500) {
      this.options.logger.error({ request_id: p.requestId, err, method: p.method, path: p.path }, 'unhandled error');
    }
    this.send(p, this.errorReply(p, apiError), p.method === 'HEAD', closeConnection);
  }

  private errorReply(p: Pending, apiError: ApiError): Reply {
    return { status: apiError.status, body: errorEnvelope(apiError, p.path, p.requestId), headers: apiError.headers };
  }

  private send(p: Pending, reply: Reply, isHead: boolean, closeConnection = false): void {
    if (p.aborted || p.done) return;
    // Every public-surface response carries the rate-limit headers. A request that never got as far as
    // an API key (no auth needed, or it failed) is counted against the client address, with the same budget.
    if (p.rate === undefined && p.isApi) {
      p.rate = this.limiter.take(`ip:${remoteAddress(p.res)}`, this.clock.now());
      if (!this.limiter.allowed(p.rate)) reply = this.errorReply(p, this.rateLimited(p.rate));
    }
    p.done = true;
    // While draining, each finished exchange closes its connection (gracefully, after the response is flushed).
    if (this.draining) closeConnection = true;
    const text = reply.text ?? (reply.body === undefined ? undefined : JSON.stringify(reply.body));
    const res = p.res;
    res.cork(() => {
      res.writeStatus(STATUS_TEXT[reply.status] ?? String(reply.status));
      res.writeHeader('X-Request-ID', p.requestId);
      if (p.rate !== undefined) {
        res.writeHeader('X-RateLimit-Limit', this.limitText);
        res.writeHeader('X-RateLimit-Remaining', String(this.limiter.remaining(p.rate)));
        res.writeHeader('X-RateLimit-Reset', String(this.limiter.resetSeconds(p.rate, this.clock.now())));
      }
      if (reply.headers !== undefined) for (const name in reply.headers) res.writeHeader(name, reply.headers[name]);
      if (text === undefined) {
        // 204 has no body by definition; anything else without one (301) says so with Content-Length: 0.
        if (reply.status === 204 || isHead) res.endWithoutBody(reply.status === 204 ? undefined : 0, closeConnection);
        else res.end(undefined, closeConnection);
      } else {
        res.writeHeader('Content-Type', reply.contentType ?? 'application/json');
        if (isHead) res.endWithoutBody(Buffer.byteLength(text), closeConnection);
        else res.end(text, closeConnection);
      }
    });
    this.finish(p, reply.status);
  }

  private finish(p: Pending, status: number): void {
    if (p.started < 0) return;
    const seconds = (performance.now() - p.started) / 1000;
    p.started = -1;
    this.inFlight--;
    const series = this.requestSeries(p.route, p.method, status);
    series.count.value++;
    series.latency.observe(seconds);
    const logger = this.options.logger;
    if (logger.isLevelEnabled('info')) {
      logger.info(
        { request_id: p.requestId, method: p.method, route: p.route, path: p.path, status, duration_ms: Math.round(seconds * 1e6) / 1e3 },
        'request',
      );
    }
    if (this.draining && this.inFlight === 0) this.drained?.();
  }

  private requestSeries(route: string, method: string, status: number): RequestSeries {
    let byMethod = this.series.get(route);
    if (byMethod === undefined) this.series.set(route, (byMethod = new Map()));
    let byStatus = byMethod.get(method);
    if (byStatus === undefined) byMethod.set(method, (byStatus = new Map()));
    let series = byStatus.get(status);
    if (series === undefined) {
      const labels = { route, method, status };
      const { metrics } = this.options;
      series = {
        count: metrics.counter('http_requests_total', 'HTTP requests by route, method and status', labels),
        latency: metrics.histogram('http_request_duration_seconds', 'HTTP request latency by route, method and status', labels),
      };
      byStatus.set(status, series);
    }
    return series;
  }
}

function tooLarge(): ApiError {
  return new ApiError('payload_too_large', `Request body exceeds the ${MAX_BODY_BYTES} byte limit`);
}

function remoteAddress(res: uWS.HttpResponse): string {
  return Buffer.from(res.getRemoteAddressAsText()).toString();
}

/** Decodes a body as UTF-8 JSON whose top level is an object, else the bad_request of interface 7.1. */
function parseJsonObject(raw: Buffer, isPatch: boolean): Record<string, unknown> {
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
    if (duplicate !== undefined) throw new ApiError('bad_request', `Request body is not valid JSON: duplicate key ${JSON.stringify(duplicate)}`);
    if (hasLoneSurrogate(text, value)) throw new ApiError('bad_request', 'Request body is not valid JSON: a string holds an unpaired UTF-16 surrogate escape');
  }
  if (value === null && isPatch) throw new ApiError('bad_request', 'Request body must be a JSON object (RFC 7396)');
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ApiError('bad_request', 'Request body could not be decoded as the expected type');
  }
  return value as Record<string, unknown>;
}
