/** The request steps on their own, without a server or a socket. */
import t from 'tap';
import { Type } from '@sinclair/typebox';
import { ApiError } from '../../src/errors/catalog.js';
import { RateLimiter } from '../../src/http/rateLimit.js';
import type { Route } from '../../src/http/route.js';
import { Router } from '../../src/http/router.js';
import {
  checkMediaType,
  compileRoute,
  decodeBody,
  matchRoute,
  parseInputs,
  requireScopes,
  takeRate,
  type CompiledRoute,
} from '../../src/http/steps.js';
import type { Principal } from '../../src/auth/authenticator.js';

const route = (method: Route['method'], path: string, extra: Partial<Route> = {}): Route => ({
  method,
  path,
  operationId: `${method}${path}`,
  summary: 's',
  tag: 'T',
  responses: {},
  handler: () => ({ status: 200 }),
  ...extra,
});

function failure(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error('expected an ApiError');
}

t.test('routing: 404, and 405 listing the allowed methods with HEAD after GET', async (t) => {
  const router = new Router<CompiledRoute>();
  router.add('GET', '/api/v1/things/{thing_id}', compileRoute(route('GET', '/api/v1/things/{thing_id}')));
  router.add('DELETE', '/api/v1/things/{thing_id}', compileRoute(route('DELETE', '/api/v1/things/{thing_id}')));
  t.equal(matchRoute(router, 'HEAD', '/api/v1/things/7').rawParams.thing_id, '7', 'HEAD runs the GET route');
  t.equal(failure(() => matchRoute(router, 'GET', '/api/v1/nothing')).status, 404);
  const refused = failure(() => matchRoute(router, 'PATCH', '/api/v1/things/7'));
  t.equal(refused.status, 405);
  t.same(refused.headers, { Allow: 'GET, HEAD, DELETE' });
});

t.test('scopes: 403 names every missing scope', async (t) => {
  const principal = { scopes: new Set(['assets:read']) } as unknown as Principal;
  t.doesNotThrow(() => requireScopes(route('GET', '/x', { scopes: ['assets:read'] }), principal));
  const refused = failure(() => requireScopes(route('GET', '/x', { scopes: ['assets:read', 'assets:write', 'tracking:read'] }), principal));
  t.equal(refused.status, 403);
  t.equal(refused.detail, 'This API key lacks the required scope: assets:write, tracking:read');
});

t.test('rate limit: the budget, then 429 with Retry-After equal to the seconds left in the window', async (t) => {
  const limiter = new RateLimiter(2);
  const start = 1_000_000;
  t.equal(takeRate(limiter, 'k', start).count, 1);
  t.equal(takeRate(limiter, 'k', start + 1).count, 2);
  const refused = failure(() => takeRate(limiter, 'k', start + 20_500));
  t.equal(refused.status, 429);
  t.same(refused.headers, { 'Retry-After': '40' });
  t.equal(takeRate(limiter, 'other', start + 20_500).count, 1, 'another key has its own budget');
  t.equal(takeRate(limiter, 'k', start + 60_000).count, 1, 'a new window starts after 60 s');
});

t.test('inputs: path ids and query into one error list', async (t) => {
  const compiled = compileRoute(route('GET', '/api/v1/things/{thing_id}', { query: {} }));
  const errors: never[] = [];
  const { params } = parseInputs(compiled, { thing_id: '12' }, '', true, errors);
  t.same(params, { thing_id: 12 });
  const failed: { field: string; code: string }[] = [];
  parseInputs(compiled, { thing_id: '0' }, 'bogus=1', true, failed as never[]);
  t.same(
    failed.map((e) => [e.field, e.code]).sort(),
    [
      ['bogus', 'unknown_field'],
      ['thing_id', 'too_small'],
    ].sort(),
  );
  const probe: never[] = [];
  parseInputs(compiled, { thing_id: '1' }, 'bogus=1', false, probe);
  t.same(probe, [], 'outside the public surface the query is not judged');
});

t.test('body: media type, then JSON rules', async (t) => {
  const post = route('POST', '/x', { body: { schema: Type.Object({}), contentType: 'application/json' } });
  const patch = route('PATCH', '/x', { body: { schema: Type.Object({}), contentType: 'application/merge-patch+json' } });
  t.doesNotThrow(() => checkMediaType(post, 'application/json; charset=utf-8'));
  t.equal(failure(() => checkMediaType(post, 'text/plain')).detail, 'Content-Type must be application/json');
  t.equal(
    failure(() => checkMediaType(patch, 'application/json')).detail,
    'Content-Type must be application/merge-patch+json on PATCH operations',
  );
  t.same(decodeBody(Buffer.from('{"a":1}'), false), { a: 1 });
  const cases: [string, boolean, string][] = [
    ['{', false, 'Request body is not valid JSON'],
    ['{"a":1,"a":2}', false, 'Request body is not valid JSON: duplicate key "a"'],
    ['null', true, 'Request body must be a JSON object (RFC 7396)'],
    ['[1]', false, 'Request body could not be decoded as the expected type'],
    ['"\\ud800"', false, 'Request body could not be decoded as the expected type'],
  ];
  for (const [text, isPatch, detail] of cases) {
    const refused = failure(() => decodeBody(Buffer.from(text), isPatch));
    t.equal(refused.status, 400, text);
    t.equal(refused.detail, detail, text);
  }
  t.equal(failure(() => decodeBody(Buffer.from([0xff, 0xfe]), false)).detail, 'Request body is not valid JSON', 'invalid UTF-8');
});
