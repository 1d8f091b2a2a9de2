/**
 * The baseline a user might otherwise pick: fastify + better-sqlite3 serving the same hot reads over
 * the same database file with the same SQL (trackd's own handlers, statements and cached token
 * verification), so the difference between it and trackd is the HTTP stack and request plumbing.
 * Run as its own process: `node fastify.js DATA_DIR`; prints {"ready":true,"port":N}.
 */
import Fastify from 'fastify';
import type { Principal } from '../../src/auth/authenticator.js';
import { authenticate, requireScopes } from '../../src/http/steps.js';
import { openRouteTable } from '../lib/routeTable.js';
import { specArg } from '../lib/args.js';

const dataDir = specArg();
const table = await openRouteTable(dataDir);
const app = Fastify({ logger: false });

for (const route of table.routes) {
  if (route.method !== 'GET' || route.scopes === undefined || !route.path.startsWith('/api/v1/')) continue;
  const fastifyPath = route.path.replace(/\{(\w+)\}/g, ':$1');
  app.get(fastifyPath, async (request, reply) => {
    // The same request steps as trackd's server (authentication, scopes, inputs), over fastify's HTTP.
    let principal: Principal;
    try {
      principal = (await authenticate(table.authenticator, route, request.headers.authorization ?? '', false, Date.now()))!;
    } catch {
      return reply.code(401).send({ type: 'unauthorized' });
    }
    try {
      requireScopes(route, principal);
    } catch {
      return reply.code(403).send({ type: 'forbidden' });
    }
    const url = request.raw.url ?? '';
    const q = url.indexOf('?');
    try {
      const ctx = await table.context(
        route,
        principal,
        request.params as Record<string, string>,
        q < 0 ? '' : url.slice(q + 1),
        q < 0 ? url : url.slice(0, q),
      );
      let result = route.handler(ctx);
      if (result instanceof Promise) result = await result;
      return reply.code(result.status).send(result.body);
    } catch (err) {
      const status = (err as { status?: number }).status ?? 400;
      return reply.code(status).send({ type: 'error', detail: (err as Error).message });
    }
  });
}

await app.listen({ host: '127.0.0.1', port: Number(process.argv[3] ?? 0) });
const address = app.server.address();
process.stdout.write(`${JSON.stringify({ ready: true, port: typeof address === 'object' && address ? address.port : 0 })}\n`);
const stop = () => {
  void app.close().then(async () => {
    await table.close();
    process.exit(0);
  });
};
process.on('SIGTERM', stop);
process.stdin.on('close', stop);
process.stdin.resume();
process.on('SIGINT', stop);
