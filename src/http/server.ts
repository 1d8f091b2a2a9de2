import { STATUS_CODES } from 'node:http';
import uWS from 'uWebSockets.js';
import { monotonicFactory } from 'ulid';
import { ApiError, type FieldError } from '../errors/catalog.js';
import { asApiError, errorEnvelope } from '../errors/envelope.js';
import type { Authenticator, Principal } from '../auth/authenticator.js';
import type { ShardRegistry } from '../shards/registry.js';
import type { StorageHealth } from '../storage/health.js';
import type { Shard } from '../shards/shard.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../ops/metrics.js';
import type { Cell, HistogramSeries } from '../ops/metrics.js';
import { RateLimiter, type RateWindow, type rateLimitBuffers } from './rateLimit.js';
import { Router } from './router.js';
import type { Reply, RequestContext, Route } from './route.js';
import {
  authenticate,
  cacheLookup,
  callHandler,
  checkMediaType,
  compileRoute,
  decodeBody,
  matchRoute,
  parseInputs,
  type rateLimited,
  requireScopes,
  resolveShard,
  takeRate,
  validateBody,
  type CompiledRoute,
} from './steps.js';
import { systemClock, type Clock } from '../clock.js';
import { inject, type InjectedRequest, type InjectedResponse } from './inject.js';
import { UploadStream } from './upload.js';
import { BULK_LIMITS } from '../bulk/limits.js';
import { checkCsrf, type ClientInfo, type SessionAuth } from '../console/session.js';
import type { ForwardedAnswer, ForwardedRequest } from '../cluster/rpcWire.js';
import { answerOf, forwardedHeaders, replyOf, type ShardForwarding } from './forwarding.js';
import { DEFAULT_HUB_OPTIONS, EventHub, streamedTrace, type HubOptions } from '../events/hub.js';
import { ticketPrincipal } from '../events/tickets.js';
import { EVENTS_WS_PATH, eventSocket, notAnUpgrade } from '../events/socket.js';

/** The idle time announced to keep-alive clients, well inside uWS's own idle timeout (about 10 s). */
const KEEP_ALIVE_HINT = 'timeout=5';

/** Largest request body accepted (1 MiB); larger bodies get 413 payload_too_large. */
export const MAX_BODY_BYTES = 1024 * 1024;
/**
 * A body must arrive in full within this time of the request head, else 408 request_timeout and the
 * connection is closed: a client trickling its body holds no buffer or socket for long. (uWS itself
 * drops a request still incomplete after about 10 s, silently; this answers first.)
 */
export const BODY_READ_TIMEOUT_MS = 5000;

/**
 * Status lines from Node's STATUS_CODES, joined once at load: a request pays one property lookup,
 * as it did with the hand-written table this replaced.
 */
const STATUS_TEXT: Record<number, string> = Object.fromEntries(
  Object.entries(STATUS_CODES).map(([code, reason]) => [code, `${code} ${reason}`]),
);

// Math.random, not the default webcrypto PRNG (16 one-byte getRandomValues calls per new millisecond):
// request ids need uniqueness, not secrecy, and the default cost 15% of an asset read (bench profile).
const nextUlid = monotonicFactory(Math.random);
/** The request as the owner gets it: what the pipeline reads, with this exchange's request id. */
function forwardedRequest(
  p: Pending,
  method: string,
  rawQuery: string,
  payload: Pick<ForwardedRequest, 'body' | 'staged'>,
): ForwardedRequest {
  return {
    method,
    url: rawQuery === '' ? p.path : `${p.path}?${rawQuery}`,
    headers: { ...p.forwardHeaders, 'x-request-id': p.requestId },
    remoteAddress: p.aborted ? '' : remoteAddress(p.res),
    ...payload,
  };
}

/** How long a front node waits for the owner's answer to a forwarded upload: the owner applies the whole body first. */
const FORWARDED_UPLOAD_ANSWER_MS = 15 * 60_000;

interface Pending {
  res: uWS.HttpResponse;
  aborted: boolean;
  done: boolean;
  method: string;
  path: string;
  /** Public surface (under /api/, and the bare OpenAPI document redirects): rate limited, X-RateLimit-* headers. */
  isApi: boolean;
  requestId: string;
  rate: RateWindow | undefined;
  started: number;
  route: string;
  /** Settles a pending body read when the client goes away. */
  abortBody: (() => void) | undefined;
  /** A streamed request body (upload routes). */
  upload: UploadStream | undefined;
  /** A streamed answer being written (exports). */
  stream: import('./route.js').ReplyStream | import('./route.js').AsyncReplyStream | undefined;
  /** Sent here by the front node that took it (shard RPC): that node charged its rate limit and writes its headers. */
  forwarded: boolean;
  /** The headers to send on should the request go to another node (cluster mode only). */
  forwardHeaders: Record<string, string> | undefined;
  /** Detaches an event stream when the client goes away. */
  abortEvents: (() => void) | undefined;
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
  /** Web sessions of the console routes (`session: true`); without it those answer 401. */
  sessions?: SessionAuth;
  /** Cluster mode: requests for the shards of other nodes go to them (shard RPC). */
  forwarding?: ShardForwarding;
  /** Event stream limits (slow clients); default DEFAULT_HUB_OPTIONS. */
  eventStreams?: HubOptions;
}

/**
 * The uWS adapter of one HTTP thread: one catch-all handler that copies what it needs out of `req`,
 * registers onAborted first, reads the body into a bounded buffer, runs the request steps
 * (steps.ts: route, authenticate, rate limit, scopes, shard, inputs, body, cache, handler) and
 * writes the answer corked, never touching `res` after an abort; plus listening, draining, and the
 * request's log line and metrics.
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
  /** This thread's event streams (Server-Sent Events). */
  readonly streams: EventHub;
  /** Responses of injected requests: without a socket an event stream cannot stay open. */
  private readonly injected = new WeakSet<uWS.HttpResponse>();

  constructor(private readonly options: HttpServerOptions) {
    this.limiter = new RateLimiter(options.rateLimitPerMinute, options.rateLimitBuffers);
    this.limitText = String(options.rateLimitPerMinute);
    this.clock = options.clock ?? systemClock;
    this.streams = new EventHub(
      options.authenticator,
      options.eventStreams ?? DEFAULT_HUB_OPTIONS,
      (reason) => {
        options.metrics.counter('event_streams_closed_total', 'Event streams (SSE, WebSocket subscriptions) the server ended, by reason', {
          reason,
        }).value++;
      },
      options.logger.isLevelEnabled('debug') ? streamedTrace(options.logger) : undefined,
    );
    this.app.ws(
      EVENTS_WS_PATH,
      eventSocket({
        hub: this.streams,
        authenticator: options.authenticator,
        shards: options.shards,
        now: () => this.clock.now(),
        highWaterBytes: options.eventStreams?.socketHighWaterBytes ?? DEFAULT_HUB_OPTIONS.socketHighWaterBytes,
      }),
    );
    this.app.any('/*', (res, req) => this.onRequest(res, req));
  }

  addRoutes(routes: Route[]): void {
    for (const route of routes) this.router.add(route.method, route.path, compileRoute(route));
  }

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
    this.streams.closeAll('shutdown');
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

  /** Answers a request without a socket, through the very handler the wire uses (tests, tools). */
  inject(request: InjectedRequest): Promise<InjectedResponse> {
    return inject((res, req) => {
      this.injected.add(res);
      this.onRequest(res, req);
    }, request);
  }

  /**
   * Runs a request another node forwarded (shard RPC) through this same pipeline, injected: it was
   * authenticated and rate-limited there, and is authenticated here again; it is never forwarded on.
   */
  async serveForwarded(request: ForwardedRequest): Promise<ForwardedAnswer> {
    const response = await inject((res, req) => this.onRequest(res, req, true), {
      method: request.method,
      url: request.url,
      headers: request.headers,
      body: request.staged === undefined ? request.body : this.options.forwarding?.uploads.read(request.staged),
      remoteAddress: request.remoteAddress,
      // A streamed answer (an export) comes back piece by piece, for the RPC server to stage as it is written.
      streamAnswer: this.options.forwarding !== undefined,
    });
    return answerOf(response);
  }

  /** The uWS side of a request: copy what is needed out of `req` (valid only in this call), then the steps. */
  private onRequest(res: uWS.HttpResponse, req: uWS.HttpRequest, forwarded = false): void {
    const started = performance.now();
    const method = req.getCaseSensitiveMethod();
    const path = req.getUrl();
    const rawQuery = req.getQuery() ?? '';
    const requestId = req.getHeader('x-request-id') || nextUlid();
    const authorization = req.getHeader('authorization');
    const hasApiKeyHeader = req.getHeader('x-api-key') !== '';
    const contentType = req.getHeader('content-type');
    const contentLength = req.getHeader('content-length');
    const headers = {
      accept: req.getHeader('accept'),
      idempotencyKey: req.getHeader('idempotency-key'),
      contentType,
      lastEventId: req.getHeader('last-event-id'),
    };
    const client: ClientInfo = {
      cookie: req.getHeader('cookie'),
      origin: req.getHeader('origin'),
      host: req.getHeader('host'),
      csrfToken: req.getHeader('x-csrf-token'),
      secFetchSite: req.getHeader('sec-fetch-site'),
      forwardedProto: req.getHeader('x-forwarded-proto'),
      remoteAddress: '',
    };

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
      upload: undefined,
      stream: undefined,
      forwarded,
      forwardHeaders: this.options.forwarding === undefined || forwarded ? undefined : forwardedHeaders(req),
      abortEvents: undefined,
    };
    res.onAborted(() => {
      p.aborted = true;
      p.abortBody?.();
      p.upload?.close('The client closed the connection before the body ended');
      p.stream?.close();
      p.abortEvents?.();
      this.finish(p, 499);
    });
    this.inFlight++;

    if (this.draining) {
      this.fail(p, new ApiError('service_unavailable', 'The server is shutting down'), true);
      return;
    }
    let compiled: CompiledRoute;
    let rawParams: Record<string, string>;
    let principal: Principal | Promise<Principal> | undefined;
    let body: Promise<Buffer | undefined> | undefined;
    try {
      if (path === EVENTS_WS_PATH) throw notAnUpgrade(method);
      ({ compiled, rawParams } = matchRoute(this.router, method, path));
      p.route = compiled.metricRoute;
      const upload = compiled.route.upload;
      if (upload !== undefined) {
        const declared = contentLength === '' ? undefined : Number(contentLength);
        if (declared !== undefined && declared > upload.maxBytes) {
          this.fail(p, new ApiError('payload_too_large', `Request body exceeds the ${upload.maxBytes} byte limit of this endpoint`), true);
          return;
        }
        p.upload = new UploadStream(res, {
          maxBytes: upload.maxBytes,
          highWaterBytes: BULK_LIMITS.highWaterBytes,
          idleMs: BULK_LIMITS.idleMs,
        });
      } else if (compiled.route.body !== undefined) {
        const declared = contentLength === '' ? undefined : Number(contentLength);
        if (declared !== undefined && declared > MAX_BODY_BYTES) {
          this.fail(p, tooLarge(), true);
          return;
        }
        body = this.readBody(p);
      }
      if (compiled.route.session) principal = this.sessionPrincipal(client.cookie);
      else if (compiled.route.ticketAuth && authorization === '' && !hasApiKeyHeader)
        principal = ticketPrincipal(this.options.shards, rawQuery);
      else principal = authenticate(this.options.authenticator, compiled.route, authorization, hasApiKeyHeader, this.clock.now());
      if (compiled.route.session || path.startsWith('/console/')) client.remoteAddress = remoteAddress(res);
    } catch (err) {
      this.fail(p, err);
      return;
    }
    void this.run(p, { compiled, rawParams, rawQuery, contentType, headers, body, principal, client, isHead: method === 'HEAD' });
  }

  private sessionPrincipal(cookie: string): Promise<Principal> {
    if (this.options.sessions === undefined) throw new ApiError('unauthorized', 'The console is not available on this server');
    return this.options.sessions.authenticate(cookie, this.clock.now());
  }

  /** The steps after routing and authentication, in the order that decides which failure answers. */
  private async run(
    p: Pending,
    request: {
      compiled: CompiledRoute;
      rawParams: Record<string, string>;
      rawQuery: string;
      contentType: string;
      headers: RequestContext['headers'];
      body: Promise<Buffer | undefined> | undefined;
      principal: Principal | Promise<Principal> | undefined;
      client: ClientInfo;
      isHead: boolean;
    },
  ): Promise<void> {
    const { compiled, isHead } = request;
    const route = compiled.route;
    try {
      const principal = request.principal instanceof Promise ? await request.principal : request.principal;
      if (p.isApi && principal !== undefined && !p.forwarded) this.chargeRate(p, principal.apiKeyId);
      if (principal !== undefined) requireScopes(route, principal);
      if (principal?.session !== undefined && route.method !== 'GET') checkCsrf(principal.session, request.client);
      const remote = this.remoteShard(p, route, principal);
      if (remote !== undefined) return await this.forward(p, remote, request);
      const shard = resolveShard(this.options.shards, route, principal);
      const errors: FieldError[] = [];
      const { params, query, textParams } = parseInputs(
        compiled,
        request.rawParams,
        request.rawQuery,
        p.isApi || route.session === true,
        errors,
      );
      if (route.upload !== undefined) checkMediaType(route, request.contentType);
      let body: Record<string, unknown> = {};
      if (route.body !== undefined && request.body !== undefined) {
        checkMediaType(route, request.contentType);
        const raw = await request.body;
        if (raw === undefined) return; // already answered (413, 408) or the client is gone
        body = decodeBody(raw, route.method === 'PATCH');
        await validateBody(compiled, body, errors, this.clock.now(), { shard, orgId: principal?.orgId, params });
      }
      if (errors.length > 0) throw ApiError.validation(errors);
      const cachedId = route.cacheable === undefined ? 0 : (params[compiled.paramNames[0] ?? ''] ?? 0);
      const cached =
        principal === undefined ? undefined : cacheLookup(route, shard, this.options.responseCacheBytes, principal.orgId, cachedId);
      if (cached !== undefined && 'hit' in cached) return this.send(p, { status: 200, text: cached.hit }, isHead);
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
        textParams,
        headers: request.headers,
        upload: p.upload,
        client: request.client,
        streams: this.streams,
      };
      const filing = cached === undefined ? undefined : { ...cached, orgId: principal!.orgId, id: cachedId };
      this.send(p, await callHandler(route, ctx, filing), isHead);
    } catch (err) {
      this.fail(p, err);
    }
  }

  /**
   * Cluster mode: the shard of the caller's org when another node owns it (the request goes there),
   * undefined when this node serves it. A forwarded request for a shard this node no longer owns
   * is refused rather than sent on (no loops while a lease moves).
   */
  private remoteShard(p: Pending, route: Route, principal: Principal | undefined): number | undefined {
    const forwarding = this.options.forwarding;
    if (forwarding === undefined || principal === undefined || route.orgScoped === false) return undefined;
    const index = this.options.shards.shardIndexOf(principal.orgId);
    if (index === undefined || forwarding.isLocal(index)) return undefined;
    if (p.forwarded)
      throw new ApiError('service_unavailable', "This node no longer owns the organization's shard; nothing was changed", {
        headers: { 'Retry-After': '1' },
      });
    return index;
  }

  /** Hands the request to the node that owns `shard` and sends its answer as this exchange's. */
  private async forward(
    p: Pending,
    shard: number,
    request: {
      compiled: CompiledRoute;
      rawParams: Record<string, string>;
      rawQuery: string;
      contentType: string;
      body: Promise<Buffer | undefined> | undefined;
      isHead: boolean;
    },
  ): Promise<void> {
    if (request.compiled.route.upload !== undefined) return this.forwardUpload(p, shard, request);
    let body: Buffer | undefined;
    if (request.body !== undefined) {
      body = await request.body;
      if (body === undefined) return; // already answered (413, 408) or the client is gone
    }
    // HEAD goes as GET: this exchange writes the answer's headers without its body.
    const method = p.method === 'HEAD' ? 'GET' : p.method;
    const forwarded = forwardedRequest(p, method, request.rawQuery, { body });
    const forwarding = this.options.forwarding!;
    const answer = await forwarding.forward(shard, forwarded, method === 'GET');
    if (answer.staged === undefined) {
      this.send(p, replyOf(answer), request.isHead);
      return;
    }
    // An answer larger than the broker's max_payload (an export): its body is in the object store,
    // streamed from there to the client. Its first piece is read before the headers go out, so a
    // staged answer that cannot be read is still a 503.
    const staged = answer.staged;
    const pieces = forwarding.uploads.read(staged);
    let first: IteratorResult<Uint8Array> | undefined;
    try {
      first = await pieces.next();
    } catch (err) {
      void forwarding.uploads.drop(staged);
      const applied = method === 'GET' ? '' : '; the request may have been applied';
      throw new ApiError(
        'service_unavailable',
        `The answer of the node that owns this organization could not be read (${(err as Error).message})${applied}`,
        { headers: { 'Retry-After': '2' } },
      );
    }
    const stream: import('./route.js').AsyncReplyStream = {
      async read() {
        const next = first ?? (await pieces.next());
        first = undefined;
        return next.done ? undefined : next.value;
      },
      close() {
        void pieces.return(undefined).catch(() => undefined);
        void forwarding.uploads.drop(staged);
      },
    };
    if (p.aborted) stream.close();
    else this.send(p, { ...replyOf(answer), stream }, request.isHead);
  }

  /**
   * An upload for another node's shard: what the owner would refuse before reading the body is
   * refused here first (the query, the media type); then the body is staged in the object store
   * (cluster/uploads.ts) and the request forwarded with the object's name. The owner reads the
   * whole body before it answers (202), so the answer is awaited for as long as an upload may take.
   */
  private async forwardUpload(
    p: Pending,
    shard: number,
    request: { compiled: CompiledRoute; rawParams: Record<string, string>; rawQuery: string; contentType: string },
  ): Promise<void> {
    const errors: FieldError[] = [];
    parseInputs(request.compiled, request.rawParams, request.rawQuery, p.isApi, errors);
    checkMediaType(request.compiled.route, request.contentType);
    if (errors.length > 0) throw ApiError.validation(errors);
    const forwarding = this.options.forwarding!;
    const staged = `${nextUlid()}`;
    try {
      await forwarding.uploads.stage(staged, p.upload!).catch((err: unknown) => {
        if (err instanceof ApiError) throw err; // the upload's own failure: over its limit, stalled, the client gone
        throw new ApiError(
          'service_unavailable',
          `The upload could not be staged for the node that owns this organization (${(err as Error).message}); nothing was changed`,
          { headers: { 'Retry-After': '2' } },
        );
      });
      const forwarded = forwardedRequest(p, p.method, request.rawQuery, { body: undefined, staged });
      const answer = await forwarding.forward(shard, forwarded, false, FORWARDED_UPLOAD_ANSWER_MS);
      this.send(p, replyOf(answer), false);
    } finally {
      void forwarding.uploads.drop(staged);
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
        if (p.abortBody === undefined) return;
        // Answered before its body came (401, 403, a bad query): stop the read timer and drop the bytes.
        if (p.done) return stop(undefined);
        size += chunk.byteLength;
        if (size > MAX_BODY_BYTES) return stop(tooLarge());
        // uWS neuters the chunk when this callback returns: copy it.
        chunks.push(Buffer.from(new Uint8Array(chunk)));
        if (isLast) stop(undefined, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
      });
    });
  }

  /** Takes one request from `key`'s budget into the exchange (its headers show the window); throws the 429 when over it. */
  private chargeRate(p: Pending, key: string): void {
    try {
      p.rate = takeRate(this.limiter, key, this.clock.now());
    } catch (err) {
      p.rate = (err as ReturnType<typeof rateLimited>).window;
      throw err;
    }
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
    if (reply.events !== undefined) {
      if (!isHead && !this.draining) {
        this.openStream(p, reply.events);
        return;
      }
      // HEAD: the GET's headers without a stream (it too would close the connection at its end).
      reply = this.draining
        ? this.errorReply(p, new ApiError('service_unavailable', 'The server is shutting down'))
        : { status: reply.status, headers: { 'Cache-Control': 'no-store' }, contentType: 'text/event-stream', text: '' };
      closeConnection = true;
    }
    // Every public-surface response carries the rate-limit headers. A request that never got as far as
    // an API key (no auth needed, or it failed) is counted against the client address, with the same budget.
    if (p.rate === undefined && p.isApi && !p.forwarded) {
      try {
        this.chargeRate(p, `ip:${remoteAddress(p.res)}`);
      } catch (err) {
        reply = this.errorReply(p, err as ApiError);
      }
    }
    p.done = true;
    // While draining, each finished exchange closes its connection (gracefully, after the response is flushed).
    if (this.draining) closeConnection = true;
    // An upload answered before its end: the rest of its body would be read as the next request.
    if (p.upload !== undefined && !p.upload.complete) closeConnection = true;
    p.upload?.close();
    if (reply.stream !== undefined) {
      if (!isHead) {
        this.sendStream(p, reply, reply.stream, closeConnection);
        return;
      }
      // HEAD: the headers of the GET; the body (whose length nobody knows before it is written) is not read.
      reply.stream.close();
      reply = { ...reply, stream: undefined, text: '' };
    }
    const text = reply.text ?? (reply.body === undefined ? undefined : JSON.stringify(reply.body));
    const res = p.res;
    res.cork(() => {
      this.writeHead(p, reply, closeConnection);
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

  /** The status line and the headers every answer carries (inside a cork). */
  private writeHead(p: Pending, reply: Reply, closeConnection: boolean): void {
    const res = p.res;
    res.writeStatus(STATUS_TEXT[reply.status] ?? String(reply.status));
    res.writeHeader('X-Request-ID', p.requestId);
    // uWS drops a keep-alive connection after about 10 s idle without a word (measured: 9.7 s); a
    // client that reuses it just then loses its request. Announcing a shorter idle time makes
    // clients that honour the hint (Node's agent, undici, most others) retire the socket first.
    if (!closeConnection) res.writeHeader('Keep-Alive', KEEP_ALIVE_HINT);
    if (p.rate !== undefined) {
      res.writeHeader('X-RateLimit-Limit', this.limitText);
      res.writeHeader('X-RateLimit-Remaining', String(this.limiter.remaining(p.rate)));
      res.writeHeader('X-RateLimit-Reset', String(this.limiter.resetSeconds(p.rate, this.clock.now())));
    }
    if (reply.headers !== undefined) for (const [name, value] of Object.entries(reply.headers)) res.writeHeader(name, value);
  }

  /**
   * A streamed answer: headers, then pieces written while the socket takes them; when it does not,
   * the rest waits for `onWritable` (uWS backpressure), so a slow client holds one piece, not the body.
   */
  private sendStream(
    p: Pending,
    reply: Reply,
    stream: import('./route.js').ReplyStream | import('./route.js').AsyncReplyStream,
    closeConnection: boolean,
  ): void {
    const res = p.res;
    p.stream = stream;
    const end = (status: number) => {
      stream.close();
      p.stream = undefined;
      this.finish(p, status);
    };
    if ('read' in stream) {
      res.cork(() => {
        this.writeHead(p, reply, closeConnection);
        res.writeHeader('Content-Type', reply.contentType ?? 'application/json');
      });
      void this.pumpAsync(p, stream, () => end(reply.status), closeConnection);
      return;
    }
    /** Writes until the socket pushes back (false) or the body ends (true). */
    const pump = (): boolean => {
      for (;;) {
        let piece: string | undefined;
        try {
          piece = stream.next();
        } catch (err) {
          // Headers are out: the only way left to say the body is incomplete is to cut the connection.
          this.options.logger.error({ request_id: p.requestId, err }, 'export stream failed');
          end(500);
          res.close();
          return true;
        }
        if (piece === undefined) {
          res.end(undefined, closeConnection);
          end(reply.status);
          return true;
        }
        // false: uWS took the piece into its own buffer; the next waits until that drained (onWritable).
        if (!res.write(piece)) return false;
      }
    };
    res.cork(() => {
      this.writeHead(p, reply, closeConnection);
      res.writeHeader('Content-Type', reply.contentType ?? 'application/json');
    });
    // uWS calls this each time the socket drained what it buffered, until the response ends.
    res.onWritable(() => {
      if (!p.aborted && p.stream !== undefined) res.cork(pump);
      return true;
    });
    res.cork(pump);
  }

  /**
   * A streamed answer whose pieces are awaited (a forwarded answer read from the object store): each
   * piece written corked, the next read only once the socket took the last (onWritable when it
   * pushed back), so memory holds a piece, not the body. A read that fails after the headers can
   * only cut the connection.
   */
  private async pumpAsync(
    p: Pending,
    stream: import('./route.js').AsyncReplyStream,
    ended: () => void,
    closeConnection: boolean,
  ): Promise<void> {
    const res = p.res;
    let writable: (() => void) | undefined;
    res.onWritable(() => {
      writable?.();
      writable = undefined;
      return true;
    });
    try {
      for (;;) {
        const piece = await stream.read();
        if (p.aborted) return;
        if (piece === undefined) {
          res.cork(() => res.end(undefined, closeConnection));
          ended();
          return;
        }
        let took = true;
        res.cork(() => {
          took = res.write(piece);
        });
        if (!took) await new Promise<void>((resolve) => (writable = resolve));
        if (p.aborted) return;
      }
    } catch (err) {
      if (p.aborted) return;
      this.options.logger.error({ request_id: p.requestId, err }, 'forwarded answer stream failed');
      stream.close();
      p.stream = undefined;
      this.finish(p, 500);
      res.close();
    }
  }

  /**
   * Starts an event stream: headers now, frames as the hub writes them (each write corked: they come
   * from timers), never after an abort. The exchange counts as finished for logs and draining; stop()
   * closes open streams itself.
   */
  private openStream(p: Pending, stream: NonNullable<Reply['events']>): void {
    p.done = true;
    const res = p.res;
    let open = true;
    res.cork(() => {
      this.writeHead(p, { status: 200 }, true);
      res.writeHeader('Content-Type', 'text/event-stream');
      res.writeHeader('Cache-Control', 'no-store');
      // The status line and headers go out at once: a client sees the stream open before any event.
      res.write(': open\n\n');
    });
    p.abortEvents = stream({
      write: (text) => {
        if (!open || p.aborted) return true;
        let ok = true;
        res.cork(() => {
          ok = res.write(text);
        });
        return ok;
      },
      cork: (writes) => {
        if (!open || p.aborted) writes();
        else res.cork(writes);
      },
      end: (text) => {
        if (!open || p.aborted) return;
        open = false;
        res.cork(() => res.end(text));
      },
      onWritable: (resume) => {
        res.onWritable(() => {
          resume();
          return true;
        });
      },
    });
    if (this.injected.has(res)) {
      // A socketless caller (the contract suite, tools) gets the opening and what was due at once.
      p.abortEvents();
      open = false;
      res.cork(() => res.end(undefined));
    }
    this.finish(p, 200);
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
