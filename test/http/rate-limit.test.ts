import t from 'tap';
import { startTrackd } from '../helpers/trackd.js';
import { expectError } from '../helpers/wire.js';

const ME = '/api/v1/orgs/me';
const LIMIT = 5;

const rate = (res: { headers: Headers }) => ({
  limit: Number(res.headers.get('x-ratelimit-limit')),
  remaining: Number(res.headers.get('x-ratelimit-remaining')),
  reset: Number(res.headers.get('x-ratelimit-reset')),
});

t.test(`rate limiting with RATE_LIMIT_PER_MIN=${LIMIT}: fixed 60 s window per key`, async (t) => {
  const trackd = await startTrackd(t, { env: { RATE_LIMIT_PER_MIN: String(LIMIT) } });
  const org = await trackd.createOrg('Acme');
  const a = await trackd.createKey(org.id, ['assets:read', 'assets:write']);
  const b = await trackd.createKey(org.id, ['assets:read']);

  t.test('every /api response of a key carries the headers, and the budget runs out into 429', async (t) => {
    // Success, 404-by-id, 415 and 405 are all charged to the key once it is known.
    const requests: [string, string, object][] = [
      ['GET', ME, {}],
      ['GET', '/api/v1/assets/2147483647', {}],
      ['POST', '/api/v1/assets', { body: { name: 'x' }, contentType: 'text/plain' }],
      ['GET', '/api/v1/assets', {}],
      ['GET', ME, {}],
    ];
    const statuses: number[] = [];
    let previousReset = 61;
    for (const [i, [method, path, extra]] of requests.entries()) {
      const res = await trackd.request(method, path, { token: a.token, ...extra });
      statuses.push(res.status);
      const r = rate(res);
      t.equal(r.limit, LIMIT, `${method} ${path}: X-RateLimit-Limit`);
      t.equal(r.remaining, LIMIT - 1 - i, `${method} ${path}: X-RateLimit-Remaining counts down`);
      t.ok(
        r.reset >= 1 && r.reset <= 60 && r.reset <= previousReset,
        `${method} ${path}: X-RateLimit-Reset ${r.reset} is the seconds left in the window`,
      );
      previousReset = r.reset;
    }
    t.same(statuses, [200, 404, 415, 200, 200]);
    for (const [method, path] of [
      ['GET', ME],
      ['GET', '/api/v1/assets'],
    ] as const) {
      const res = await trackd.request(method, path, { token: a.token });
      expectError(t, res, { status: 429, type: 'rate_limited', instance: path }, `${method} ${path} over budget`);
      const retryAfter = res.headers.get('retry-after');
      t.match(retryAfter, /^\d+$/, 'Retry-After in whole seconds');
      t.equal(Number(retryAfter), rate(res).reset, 'Retry-After equals X-RateLimit-Reset');
      t.ok(Number(retryAfter) >= 1 && Number(retryAfter) <= 60, 'within the 60 s window');
      t.same([rate(res).limit, rate(res).remaining], [LIMIT, 0], 'limit and zero remaining on 429');
    }
  });

  t.test('another key has its own budget', async (t) => {
    const res = await trackd.request('GET', ME, { token: b.token });
    t.equal(res.status, 200);
    t.same([rate(res).limit, rate(res).remaining], [LIMIT, LIMIT - 1]);
  });

  t.test('before authentication the client address is the key: 401, 404, 405 carry the headers, then 429', async (t) => {
    const requests: [string, string, object, number][] = [
      ['GET', ME, {}, 401],
      ['GET', ME, { headers: { authorization: 'Bearer forged' } }, 401],
      ['GET', '/api/v1/nope', {}, 404],
      ['OPTIONS', ME, {}, 405],
      ['GET', '/api/openapi.json', {}, 200],
    ];
    for (const [i, [method, path, extra, status]] of requests.entries()) {
      const res = await trackd.request(method, path, extra);
      t.equal(res.status, status, `${method} ${path}`);
      t.same([rate(res).limit, rate(res).remaining], [LIMIT, LIMIT - 1 - i], `${method} ${path}: headers of the address budget`);
      t.ok(rate(res).reset >= 1 && rate(res).reset <= 60, 'reset within the window');
    }
    const over = await trackd.request('GET', ME);
    expectError(t, over, { status: 429, type: 'rate_limited', instance: ME }, 'unauthenticated over budget');
    t.match(over.headers.get('retry-after'), /^\d+$/);
    t.equal(over.headers.get('www-authenticate'), null, 'a 429 is not a 401');
    const keyed = await trackd.request('GET', ME, { token: b.token });
    t.equal(keyed.status, 200, 'a valid key is not held to the address budget');
  });

  t.test('the ops endpoints are outside the public surface: no rate limit', async (t) => {
    for (const path of ['/healthz', '/readyz', '/metrics']) {
      const res = await trackd.request('GET', path);
      t.equal(res.status, 200, path);
      t.equal(res.headers.get('x-ratelimit-limit'), null, `${path}: no rate-limit headers`);
    }
  });
});
