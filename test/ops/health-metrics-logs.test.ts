import path from 'node:path';
import t from 'tap';
import { startNatsServer } from '../../src/nats/embedded.js';
import { ALL_SCOPES, eventually, spawnTrackd, startNats, startTrackd } from '../helpers/trackd.js';
import { ULID, rawRequest } from '../helpers/wire.js';

const ME = '/api/v1/orgs/me';

/** Prometheus text to `name{labels}` -> value. */
function parseMetrics(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

t.test('health, readiness, metrics and request logs', async (t) => {
  const nats = await startNats(t);
  const trackd = await startTrackd(t, { natsUrl: nats.url });
  const org = await trackd.createOrg('Acme');
  const key = await trackd.createKey(org.id, ALL_SCOPES);

  t.test('/healthz and /readyz need no key and sit outside /api/', async (t) => {
    const health = await trackd.request('GET', '/healthz');
    t.equal(health.status, 200);
    t.same(health.json, { status: 'ok' });
    const ready = await trackd.request('GET', '/readyz');
    t.equal(ready.status, 200);
    t.match(ready.json, { status: 'ready', storage: true, consumer: true });
    t.equal((await trackd.request('HEAD', '/readyz')).status, 200, 'HEAD too');
  });

  t.test('request logs: one JSON line per request with method, route, status, duration, request_id; never the token', async (t) => {
    const sent: [string, string, Record<string, string>, number, string][] = [
      ['GET', ME, { authorization: `Bearer ${key.token}` }, 200, ME],
      ['GET', '/api/v1/assets/12345', { authorization: `Bearer ${key.token}` }, 404, '/api/v1/assets/{asset_id}'],
      ['GET', ME, { authorization: `Bearer ${key.token}x` }, 401, ME],
      ['GET', ME, { 'x-api-key': key.token }, 401, ME],
      ['PUT', ME, {}, 405, 'unmatched'],
      ['GET', '/nope', {}, 404, 'unmatched'],
      ['HEAD', '/healthz', {}, 200, '/healthz'],
    ];
    for (const [i, [method, urlPath, headers, status, route]] of sent.entries()) {
      const requestId = `log-check-${i}`;
      const res = await trackd.request(method, urlPath, { headers: { ...headers, 'x-request-id': requestId } });
      t.equal(res.status, status, `${method} ${urlPath}`);
      // The line is written before the response leaves (synchronously, to the harness's log file).
      const lines = trackd.logs().filter((l) => l.request_id === requestId && l.msg === 'request');
      t.equal(lines.length, 1, `${method} ${urlPath}: exactly one request line, written by the time it is answered`);
      t.match(lines[0], { level: 30, method, route, status, request_id: requestId, path: urlPath }, `${method} ${urlPath}: fields`);
      t.type(lines[0].duration_ms, 'number', 'duration in ms');
      t.ok(lines[0].duration_ms >= 0 && lines[0].duration_ms < 10_000, 'duration is plausible');
    }
    const generated = await trackd.request('GET', ME, { token: key.token });
    const id = generated.headers.get('x-request-id') as string;
    t.match(id, ULID);
    t.ok(await eventually(() => trackd.logs().find((l) => l.request_id === id && l.msg === 'request')), 'generated ids are logged too');
    const raw = JSON.stringify(trackd.logs());
    t.notOk(raw.includes(key.token), 'the token never appears in the logs');
    t.notOk(raw.includes(key.token.split('.')[2]!), 'not even its signature');
  });

  t.test('each shard actor logs its start with the size and build time of its report index', async (t) => {
    const started = trackd.logs().filter((l) => l.msg === 'shard actor started');
    t.ok(started.length >= 1, 'at least the org shard has started');
    for (const line of started) {
      t.type(line.shard, 'number', 'shard index');
      t.match(line.report_index, { positions: Number, bytes: Number, ms: Number, megabytes: Number }, 'index figures');
      t.equal(line.report_index.positions, 0, 'a fresh data dir has no positions to index');
    }
  });

  t.test('/metrics: Prometheus text with request counts and latency histograms by route and status', async (t) => {
    for (let i = 0; i < 3; i++) await trackd.request('GET', ME, { token: key.token });
    await trackd.request('GET', '/nope');
    const res = await trackd.request('GET', '/metrics');
    t.equal(res.status, 200);
    t.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
    t.match(res.text, /# TYPE http_requests_total counter/);
    t.match(res.text, /# TYPE http_request_duration_seconds histogram/);
    const m = parseMetrics(res.text);
    const ok = 'route="/api/v1/orgs/me",method="GET",status="200"';
    const count = m.get(`http_requests_total{${ok}}`) ?? 0;
    t.ok(count >= 4, `GET /orgs/me 200 counted (${count})`);
    t.equal(m.get(`http_request_duration_seconds_count{${ok}}`), count, 'histogram count equals the counter');
    t.equal(m.get(`http_request_duration_seconds_bucket{${ok},le="+Inf"}`), count, '+Inf bucket holds every observation');
    const buckets = [...m.entries()].filter(([k]) => k.startsWith(`http_request_duration_seconds_bucket{${ok},le=`)).map(([, v]) => v);
    t.ok(buckets.length > 5, 'several buckets');
    t.same(
      buckets,
      [...buckets].sort((x, y) => x - y),
      'buckets are cumulative',
    );
    t.ok((m.get(`http_request_duration_seconds_sum{${ok}}`) ?? -1) > 0, 'latency sum');
    t.ok((m.get('http_requests_total{route="unmatched",method="GET",status="404"}') ?? 0) >= 1, 'unknown paths share one label');
    t.equal([...m.keys()].filter((k) => k.includes('/nope')).length, 0, 'raw paths never become labels');
  });

  t.test('/readyz is 503 while NATS is down, 200 again after it returns', async (t) => {
    await nats.stop();
    const down = await eventually(async () => {
      const r = await trackd.request('GET', '/readyz');
      return r.status === 503 ? r : undefined;
    }, 10_000);
    t.match(down.json, { status: 'not_ready', consumer: false });
    t.equal((await trackd.request('GET', '/healthz')).status, 200, 'still alive');
    t.equal((await trackd.request('GET', ME, { token: key.token })).status, 200, 'the API still answers');
    const again = await startNatsServer({ storeDir: nats.storeDir, port: nats.port, serverName: `again-${path.basename(nats.storeDir)}` });
    t.teardown(() => again.stop());
    const ready = await eventually(
      async () => {
        const r = await trackd.request('GET', '/readyz');
        return r.status === 200 ? r : undefined;
      },
      20_000,
      200,
    );
    t.match(ready.json, { status: 'ready', consumer: true }, 'ready again once nats-server is back');
  });
});

t.test('SIGTERM: stop accepting, finish in-flight requests, exit 0 within 10 s', async (t) => {
  const trackd = await spawnTrackd(t);
  const org = await trackd.createOrg('Acme');
  const key = await trackd.createKey(org.id, ALL_SCOPES);
  const body = JSON.stringify({ name: 'Shipped during shutdown' });
  const head = [
    'POST /api/v1/assets HTTP/1.1',
    'Host: 127.0.0.1',
    'Content-Type: application/json',
    `Authorization: Bearer ${key.token}`,
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Expect: 100-continue',
  ].join('\r\n');
  // The request is in flight (the server parsed its head and answered 100 Continue; half the body
  // follows), the rest of the body arrives after SIGTERM.
  const half = Math.floor(body.length / 2);
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let continued!: () => void;
  const headParsed = new Promise<void>((r) => (continued = r));
  const inFlight = rawRequest(
    trackd.port,
    head,
    (async function* () {
      await headParsed;
      yield body.slice(0, half);
      await gate;
      yield body.slice(half);
    })(),
    10_000,
    continued,
  );
  await headParsed;
  const signalled = Date.now();
  const exited = trackd.stop('SIGTERM');
  await eventually(() => trackd.logs().find((l) => l.msg === 'shutting down'), 5000);
  const refused = await fetch(`${trackd.baseUrl}/healthz`).then(
    (r) => r.status,
    () => 'refused',
  );
  t.equal(refused, 'refused', 'new connections are refused once shutting down');
  release();
  const res = await inFlight;
  t.equal(res.status, 201, 'the in-flight POST completed');
  t.equal(JSON.parse(res.body).data.name, 'Shipped during shutdown');
  const code = await exited;
  const took = Date.now() - signalled;
  t.equal(code, 0, 'exit code 0');
  t.ok(took < 10_000, `exited ${took} ms after SIGTERM`);
  t.ok(
    trackd.logs().find((l) => l.msg === 'stopped'),
    'logged a clean stop',
  );
});
