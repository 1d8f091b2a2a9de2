import { DEFAULT_HUB_OPTIONS } from '../events/hub.js';
import type { Authenticator } from '../auth/authenticator.js';
import { allRoutes } from '../routes.js';
import type { Services } from '../services.js';
import type { rateLimitBuffers } from './rateLimit.js';
import { HttpServer } from './server.js';
import { Accounts } from '../console/accounts.js';
import { SessionAuth } from '../console/session.js';

/** trackd's HTTP server with every route, over a thread's services (an HTTP thread's, or the in-process one's). */
export function createHttpServer(
  services: Services,
  authenticator: Authenticator,
  rateLimit: ReturnType<typeof rateLimitBuffers>,
): HttpServer {
  const { config } = services;
  const sessions = services.signingKey === undefined ? undefined : new SessionAuth(new Accounts(services.control), services.signingKey);
  const http = new HttpServer({
    host: config.HOST,
    port: config.PORT,
    logger: services.logger,
    metrics: services.metrics,
    authenticator,
    rateLimitPerMinute: config.RATE_LIMIT_PER_MIN,
    rateLimitBuffers: rateLimit,
    shards: services.shards,
    storageHealth: services.storageHealth,
    responseCacheBytes: config.RESPONSE_CACHE_MB * 1024 * 1024,
    clock: services.clock,
    sessions,
    forwarding: services.forwarding,
    eventStreams: {
      ...DEFAULT_HUB_OPTIONS,
      // Tests only: a poll long enough that only the commits' wake delivers (test/events/stream-wake.test.ts).
      ...(process.env.TRACKD_TEST_EVENT_POLL_MS ? { pollMs: Number(process.env.TRACKD_TEST_EVENT_POLL_MS) } : {}),
      slowMs: config.EVENT_STREAM_SLOW_SECONDS * 1000,
      maxLag: config.EVENT_STREAM_MAX_LAG,
    },
  });
  http.addRoutes(allRoutes(services, sessions));
  return http;
}
