/**
 * HTTP on every thread, one process as far as clients and operators can tell: every thread answers
 * on the one port, a key's budget is the process's (not multiplied by the thread count), and
 * /metrics counts the requests of every thread.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { loadConfig } from '../../src/config.js';
import { HttpThreads } from '../../src/http/threads.js';
import { createLogger } from '../../src/log.js';
import { Metrics } from '../../src/ops/metrics.js';
import { Readiness } from '../../src/ops/readiness.js';
import type { ShardActors } from '../../src/shards/actors.js';
import { startTrackd } from '../helpers/trackd.js';

const THREADS = 4;

t.test('HTTP_THREADS threads share the port, the rate limits and the metrics', async (t) => {
  const budget = 150;
  const trackd = await startTrackd(t, { env: { HTTP_THREADS: String(THREADS), RATE_LIMIT_PER_MIN: String(budget) } });
  t.match(
    trackd.logs().find((l) => l.msg === 'listening'),
    { http_threads: THREADS },
    'the listening line names the thread count',
  );
  const org = await trackd.createOrg('Threads');
  const { token } = await trackd.createKey(org.id);

  // Each request on its own connection: the kernel spreads them over the threads' sockets.
  const sent = budget * 2;
  const answers = await Promise.all(Array.from({ length: sent }, () => trackd.http('GET', '/api/v1/orgs/me', { token })));
  const statuses = answers.map((a) => a.status);
  t.equal(statuses.filter((s) => s === 200).length, budget, `exactly the budget (${budget}) answered 200 over ${THREADS} threads`);
  t.equal(statuses.filter((s) => s === 429).length, sent - budget, 'every request past the budget answered 429');
  const remaining = answers
    .filter((a) => a.status === 200)
    .map((a) => Number(a.headers.get('x-ratelimit-remaining')))
    .sort((a, b) => a - b);
  t.same(
    remaining,
    Array.from({ length: budget }, (_, i) => i),
    'X-RateLimit-Remaining counts down once through the budget, no value twice',
  );

  const threads = new Set(
    trackd
      .logs()
      .filter((l) => l.msg === 'request' && l.route === '/api/v1/orgs/me')
      .map((l) => l.thread),
  );
  t.ok(threads.size >= 2, `requests were served by several threads (${[...threads].join(', ')})`);

  // trackd runs in this process: garbage made here is collected by the thread its main loop runs on.
  let garbage = 0;
  for (let i = 0; i < 1_000_000; i++) garbage += JSON.stringify({ i }).length;
  t.ok(garbage > 0);
  const metrics = (await trackd.request('GET', '/metrics')).text;
  const counted = metrics
    .split('\n')
    .filter((l) => l.startsWith('http_requests_total{route="/api/v1/orgs/me"'))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  t.equal(counted, sent, '/metrics counts the requests of every thread');
  t.match(metrics, /^process_resident_memory_bytes \d+$/m, 'process memory once, for the whole process');
  const lagThreads = [...metrics.matchAll(/^nodejs_eventloop_lag_p99_seconds\{thread="([\w-]+)"\} ([\d.e-]+)$/gm)];
  t.same(
    lagThreads.map((m) => m[1]).sort(),
    ['http-0', 'http-1', 'http-2', 'http-3', 'main'],
    'event-loop lag per thread that serves (main: the scan consumer; every HTTP thread)',
  );
  t.ok(
    lagThreads.every((m) => Number(m[2]) >= 0 && Number(m[2]) < 60),
    'lag is a number of seconds beyond the sampling interval',
  );
  t.match(metrics, /^# TYPE nodejs_gc_duration_seconds histogram$/m, 'GC pauses under the standard histogram name');
  t.match(metrics, /^nodejs_gc_duration_seconds_count\{kind="(minor|major|incremental|weakcb)"\} [1-9]\d*$/m, 'GC pauses counted by kind');
});

t.test('the port is discoverable at LOG_LEVEL=warn: the listening line and DATA_DIR/http.url', async (t) => {
  const trackd = await startTrackd(t, { env: { LOG_LEVEL: 'warn' } });
  const listening = trackd.logs().filter((l) => l.msg === 'listening');
  t.equal(listening.length, 1, 'one listening line although info is below the level');
  t.equal(listening[0].port, trackd.port);
  t.equal(fs.readFileSync(path.join(trackd.dataDir, 'http.url'), 'utf8'), `http://127.0.0.1:${trackd.port}\n`);
  t.equal((await trackd.request('GET', '/healthz')).status, 200);
  t.equal(await trackd.stop(), 0, 'stops cleanly; every line it printed is read');
  t.notOk(
    trackd.logs().some((l) => l.msg === 'request'),
    'the level still holds for everything else (no request line)',
  );
});

t.test('a second trackd on a port already served refuses to start instead of sharing it', async (t) => {
  const first = await startTrackd(t);
  await t.rejects(
    startTrackd(t, { env: { PORT: String(first.port) } }),
    /the port is in use by another process/,
    'the second exits with one line saying why',
  );
  t.equal((await first.request('GET', '/healthz')).status, 200, 'the first still serves');
});

t.test('an HTTP thread that fails to start is reported, and stopping the threads after it does not hang', async (t) => {
  // A DATA_DIR that is a file: the thread cannot open the control database.
  const file = path.join(t.testdir(), 'not-a-directory');
  fs.writeFileSync(file, '');
  const config = loadConfig({ DATA_DIR: file, LOG_LEVEL: 'silent', SHARDS: '1' });
  const threads = new HttpThreads(config, createLogger('silent'), new Readiness(), {} as ShardActors, new Metrics(), (err) => {
    throw err;
  });
  await t.rejects(threads.start(1), 'the start fails with the thread');
  await t.resolves(threads.stop(), 'every thread stops, the failed one included (it answers the stop too)');
});
