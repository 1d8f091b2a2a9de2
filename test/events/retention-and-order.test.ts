/**
 * The event log under concurrent writers and past its retention: the per-org sequence has no gaps
 * while HTTP writes (two HTTP threads) and scan ingest commit at once, and a cursor older than
 * EVENT_RETENTION_SECONDS gets 410 cursor_expired naming the oldest sequence held.
 */
import t from 'tap';
import { allEvents, streamEvents } from '../helpers/events.js';
import { drained, natsClient, publish, scanBody } from '../helpers/scans.js';
import { eventually, startTrackd } from '../helpers/trackd.js';
import { expectError } from '../helpers/wire.js';

t.test('the per-org sequence has no gaps under concurrent HTTP writes and scan ingest', async (t) => {
  const trackd = await startTrackd(t, { env: { HTTP_THREADS: '2', SHARDS: '1', HISTORY_GAP_SECONDS: '0' } });
  const org = await trackd.createOrg('Concurrent');
  const { token } = await trackd.createKey(org.id);
  const nc = await natsClient(t, trackd.natsUrl);
  const post = async (path: string, body: unknown) => {
    const res = await trackd.http('POST', path, { token, body });
    if (res.status !== 201) throw new Error(`${path}: ${res.status} ${res.text}`);
    return res.json.data;
  };
  await Promise.all([1, 2, 3].map((i) => post('/api/v1/locations', { external_key: `D${i}`, name: `Dock ${i}` })));
  const scanned = await Promise.all(
    Array.from({ length: 20 }, (_, i) => post('/api/v1/assets', { name: `S${i}`, tags: [{ tag_type: 'rfid', value: `S${i}` }] })),
  );
  const base = Date.now() - 3_600_000;
  // 20 assets moved round three docks 10 times each, published while 60 creates and patches go over HTTP.
  const scans = (async () => {
    for (let round = 0; round < 10; round++) {
      await Promise.all(
        scanned.map((_, i) =>
          publish(nc, `scans.${org.id}.fixed`, scanBody(`D${((round + i) % 3) + 1}`, [`rfid:S${i}`], new Date(base + round * 1000))),
        ),
      );
    }
  })();
  const writes = Promise.all(
    Array.from({ length: 30 }, async (_, i) => {
      const asset = await post('/api/v1/assets', { name: `W${i}` });
      const res = await trackd.http('PATCH', `/api/v1/assets/${asset.id}`, { token, body: { name: `W${i}'` } });
      if (res.status !== 200) throw new Error(`patch: ${res.status}`);
    }),
  );
  await Promise.all([scans, writes]);
  await drained(nc);

  const events = await allEvents(trackd, token);
  t.same(
    events.map((e) => e.seq),
    events.map((_, i) => i + 1),
    `seq 1..${events.length} with no gaps`,
  );
  const count = (type: string) => events.filter((e) => e.type === type).length;
  t.equal(count('location.created'), 3);
  t.equal(count('asset.created'), 50);
  t.equal(count('asset.updated'), 30);
  t.equal(count('asset.moved'), 200, 'every scan moved its asset (each round to another dock)');
  const streamed = await eventually(async () => {
    const got = await streamEvents(nc, org.id);
    return got.length >= events.length ? got : undefined;
  });
  t.same(
    streamed.map((m) => m.orgSeq),
    events.map((e) => e.seq),
    'the stream holds them once each, in sequence order',
  );
});

t.test('a cursor older than the retention: 410 cursor_expired with the oldest sequence; the sequence goes on', async (t) => {
  const trackd = await startTrackd(t, { env: { EVENT_RETENTION_SECONDS: '1' } });
  const org = await trackd.createOrg('Retention');
  const { token } = await trackd.createKey(org.id);
  for (let i = 0; i < 3; i++) {
    const res = await trackd.request('POST', '/api/v1/locations', { token, body: { external_key: `OLD-${i}`, name: 'Old' } });
    t.equal(res.status, 201);
  }
  t.equal((await allEvents(trackd, token)).length, 3, 'three events held');
  // Relayed, then older than a second: pruned (the relay asks about ten times per retention). The
  // three were created moments apart, so a prune may first take only the oldest of them: wait for all.
  const expired = await eventually(async () => {
    const res = await trackd.request('GET', '/api/v1/events?after=0', { token });
    return res.status === 410 && res.headers.get('trackd-oldest-seq') === '4' ? res : undefined;
  });
  expectError(t, expired, { status: 410, type: 'cursor_expired', instance: '/api/v1/events', detail: /oldest available event is 4/ });
  t.equal(expired.headers.get('trackd-oldest-seq'), '4', 'Trackd-Oldest-Seq names the next sequence (none held)');
  const res = await trackd.request('POST', '/api/v1/locations', { token, body: { external_key: 'NEW', name: 'New' } });
  t.equal(res.status, 201);
  const page = await trackd.request('GET', '/api/v1/events?after=3', { token });
  t.same(
    page.json.data.map((e: { seq: number; type: string }) => [e.seq, e.type]),
    [[4, 'location.created']],
    'the sequence goes on from 4 after the prune',
  );
  const stale = await trackd.request('GET', '/api/v1/events?after=2', { token });
  expectError(t, stale, { status: 410, type: 'cursor_expired', instance: '/api/v1/events', detail: /oldest available event is 4/ });
});
