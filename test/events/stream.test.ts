/**
 * Server-Sent Events (issue 15, step 2): live events, resume with Last-Event-ID (every event exactly
 * once across a disconnect), filters, single-use tickets for browsers, org isolation, a revoked
 * key's stream closed within a second, a slow client closed with its resume position.
 */
import t from 'tap';
import { allEvents } from '../helpers/events.js';
import { drained, metric } from '../helpers/scans.js';
import { eventually } from '../helpers/trackd.js';
import { openStream } from '../helpers/sse.js';
import { streamFixture } from '../helpers/streamFixture.js';

const { trackd, org, other, admin, nc, post, scan } = await streamFixture(t, 'Stream');
const site = await post('/api/v1/locations', { external_key: 'S-SITE', name: 'Site' });
await post('/api/v1/locations', { external_key: 'S-DOCK', name: 'Dock', parent_id: site.id });
await post('/api/v1/locations', { external_key: 'S-YARD', name: 'Yard' });
const a1 = await post('/api/v1/assets', { external_key: 'S-A1', name: 'A1', tags: [{ tag_type: 'rfid', value: 'SA1' }] });
const a2 = await post('/api/v1/assets', { external_key: 'S-A2', name: 'A2', tags: [{ tag_type: 'rfid', value: 'SA2' }] });

t.test('live events, then a disconnect and a resume with Last-Event-ID: every event exactly once, in order', async (t) => {
  const head = (await allEvents(trackd, admin)).at(-1)!.seq;
  const first = await openStream(trackd, { token: admin });
  t.equal(first.status, 200);
  t.equal(first.headers['content-type'], 'text/event-stream');
  await scan('S-DOCK', 'SA1');
  await post('/api/v1/assets', { name: 'Live 1' });
  const got = await first.waitFor(2);
  t.same(
    got.map((e) => [e.seq, e.type]),
    [
      [head + 1, 'asset.moved'],
      [head + 2, 'asset.created'],
    ],
    'a stream without a position starts with new events',
  );
  t.same(
    first.frames.slice(0, 2).map((f) => [f.id, f.event]),
    [
      [String(head + 1), 'asset.moved'],
      [String(head + 2), 'asset.created'],
    ],
    'frames carry id = seq and event = type',
  );
  first.close();
  await first.ended;
  // Missed while away.
  await scan('S-YARD', 'SA1');
  await post('/api/v1/assets', { name: 'Live 2' });
  await post('/api/v1/assets', { name: 'Live 3' });
  await drained(nc);
  const resumed = await openStream(trackd, { token: admin, lastEventId: first.frames.at(-1)!.id });
  await post('/api/v1/assets', { name: 'Live 4' });
  const rest = await resumed.waitFor(4);
  t.same(
    [...got, ...rest].map((e) => e.seq),
    [1, 2, 3, 4, 5, 6].map((i) => head + i),
    'across the disconnect every event arrived once, in order',
  );
  t.same([...got, ...rest], (await allEvents(trackd, admin, head)).slice(0, 6), 'the same events as the log');
  resumed.close();
  const fromAfter = await openStream(trackd, { token: admin, query: `?after=${head}` });
  t.same(
    (await fromAfter.waitFor(6)).map((e) => e.seq),
    [1, 2, 3, 4, 5, 6].map((i) => head + i),
    '?after= starts after that sequence',
  );
  fromAfter.close();
});

t.test('filters: types, asset ids, a location subtree', async (t) => {
  const head = (await allEvents(trackd, admin)).at(-1)!.seq;
  const after = `after=${head}`;
  const moves = await openStream(trackd, { token: admin, query: `?${after}&type=asset.moved` });
  const ofA2 = await openStream(trackd, { token: admin, query: `?${after}&asset_id=${a2.id}` });
  const underSite = await openStream(trackd, { token: admin, query: `?${after}&location_id=${site.id}&type=asset.moved` });
  const anyUnderSite = await openStream(trackd, { token: admin, query: `?${after}&location_id=${site.id}` });
  await scan('S-DOCK', 'SA2'); // into the site
  await scan('S-YARD', 'SA1'); // A1 is in the yard already: no move
  await scan('S-DOCK', 'SA1'); // into the site
  await post(`/api/v1/assets/${a2.id}/tags`, { tag_type: 'ble', value: 'SA2-BLE' });
  await post('/api/v1/assets', { name: 'Unrelated' });
  await scan('S-YARD', 'SA2'); // out of the site
  await drained(nc);
  const all = await allEvents(trackd, admin, head);
  t.same(
    all.map((e) => e.type),
    ['asset.moved', 'asset.moved', 'tag.attached', 'asset.created', 'asset.moved'],
  );
  t.same(
    (await moves.waitFor(3)).map((e) => e.seq),
    all.filter((e) => e.type === 'asset.moved').map((e) => e.seq),
    'type=asset.moved',
  );
  t.same(
    (await ofA2.waitFor(3)).map((e) => e.type),
    ['asset.moved', 'tag.attached', 'asset.moved'],
    'asset_id: its moves and its tags only',
  );
  t.same(
    (await underSite.waitFor(3)).map((e) => [e.data.asset.id, e.data.to.external_key]),
    [
      [a2.id, 'S-DOCK'],
      [a1.id, 'S-DOCK'],
      [a2.id, 'S-YARD'],
    ],
    'location_id: moves into and out of the subtree',
  );
  t.same(
    (await anyUnderSite.waitFor(3)).map((e) => e.type),
    ['asset.moved', 'asset.moved', 'asset.moved'],
    'location_id without a type: the moves, not the tag of an asset or an asset created elsewhere',
  );
  for (const s of [moves, ofA2, underSite, anyUnderSite]) s.close();
  const bad = await openStream(trackd, { token: admin, query: '?type=asset.teleported' });
  t.equal(bad.status, 400, 'an unknown type is a validation error');
  t.match(JSON.parse(bad.body).error.fields[0], { field: 'type', code: 'invalid_value' });
});

t.test('tickets: single use, about a minute, never the key in the URL', async (t) => {
  const minted = await trackd.http('POST', '/api/v1/events/tickets', { token: admin, body: {} });
  t.equal(minted.status, 201, minted.text);
  t.ok(Date.parse(minted.json.data.expires_at) - Date.now() <= 60_000, 'valid for at most 60 s');
  const query = `?ticket=${encodeURIComponent(minted.json.data.ticket)}`;
  const stream = await openStream(trackd, { query });
  t.equal(stream.status, 200, 'the ticket opens a stream without an Authorization header');
  await post('/api/v1/assets', { name: 'Ticketed' });
  t.equal((await stream.waitFor(1))[0]!.type, 'asset.created');
  stream.close();
  const again = await openStream(trackd, { query });
  t.equal(again.status, 401, 'the same ticket again: 401');
  t.match(JSON.parse(again.body).error, { type: 'unauthorized', detail: /already used/ });
  const forged = await openStream(trackd, { query: `?ticket=${org.id}.${'A'.repeat(32)}` });
  t.equal(forged.status, 401, 'an unknown ticket: 401');
  const keyInUrl = await openStream(trackd, { query: `?token=${admin}` });
  t.equal(keyInUrl.status, 401, 'a key in the URL authenticates nothing');
  const noScope = (await trackd.createKey(org.id, ['assets:write'])).token;
  t.equal((await trackd.http('POST', '/api/v1/events/tickets', { token: noScope, body: {} })).status, 403, 'a ticket needs an event scope');
});

t.test("org isolation: another org's stream sees none of these events", async (t) => {
  const theirs = await openStream(trackd, { token: (await trackd.createKey(other.id)).token, query: '?after=0' });
  await post('/api/v1/assets', { name: 'Ours' });
  await post('/api/v1/locations', { external_key: 'THEIRS', name: 'Theirs' }, (await trackd.createKey(other.id)).token);
  const [only] = await theirs.waitFor(1);
  t.same([only!.org_id, only!.seq, only!.type], [other.id, 1, 'location.created']);
  await new Promise((r) => setImmediate(r));
  t.equal(theirs.events.length, 1);
  theirs.close();
});

t.test("a revoked key's stream is closed within a second", async (t) => {
  const key = await trackd.createKey(org.id, ['tracking:read']);
  const stream = await openStream(trackd, { token: key.token });
  t.equal(stream.status, 200);
  await trackd.cli(['keys', 'revoke', key.api_key_id]);
  const revokedAt = Date.now();
  await stream.ended;
  const elapsed = Date.now() - revokedAt;
  t.ok(elapsed < 1000, `closed ${elapsed} ms after the revoke`);
  t.equal(stream.closedWith?.reason, 'unauthorized');
});

t.test('a client that stops reading is closed (slow_consumer) and resumes from its position', async (t) => {
  const head = (await allEvents(trackd, admin)).at(-1)!.seq;
  const stream = await openStream(trackd, { token: admin });
  stream.pause();
  // About 22 MB of events (each carries its asset's metadata): more than loopback's socket buffers hold.
  const big = 'x'.repeat(900_000);
  const N = 25;
  const closedBefore = await metric(trackd, 'event_streams_closed_total', 'reason="slow_consumer"');
  for (let i = 0; i < N; i++) await post('/api/v1/assets', { name: `Big ${i}`, metadata: { big } });
  // Still not reading until the server has given up on it: a resume before then (the posts done
  // within the slow limit of the buffer filling up) would find the stream alive, and rightly so.
  const closed = await eventually(
    async () => (await metric(trackd, 'event_streams_closed_total', 'reason="slow_consumer"')) > closedBefore,
    30_000,
    50,
  ).catch(() => false);
  t.ok(closed, 'the server closed the stream of the client that did not read (event_streams_closed_total)');
  stream.resume();
  await stream.ended;
  const got = stream.events.map((e) => e.seq);
  t.ok(got.length < N, `it got ${got.length} of ${N} before the close`);
  // The close frame arrives when the client reads its buffer within uWS's close of the response; one
  // that reads nothing for longer (these posts take seconds on a loaded machine) sees the connection drop.
  if (stream.closedWith !== undefined) {
    t.equal(stream.closedWith.reason, 'slow_consumer', 'closed with reason slow_consumer');
    t.equal(stream.closedWith.resume_after, got.at(-1) ?? head, 'resume_after is the last event it was given');
  } else t.comment('no close frame: the connection dropped unread');
  // Resume with Last-Event-ID = the last event received, as often as the stream ends.
  const all = [...got];
  let reconnects = 0;
  while (all.length < N && reconnects < 20) {
    reconnects++;
    const resumed = await openStream(trackd, { token: admin, lastEventId: String(all.at(-1) ?? head) });
    const ended = await Promise.race([resumed.waitFor(N - all.length, 60_000).then(() => 'all'), resumed.ended.then(() => 'ended')]);
    all.push(...resumed.events.map((e) => e.seq));
    if (ended === 'all') resumed.close();
  }
  t.same(
    all,
    Array.from({ length: N }, (_, i) => head + i + 1),
    `with Last-Event-ID = the last event received (${reconnects} reconnects) it gets the rest, each once`,
  );
});
