/**
 * The event log (issue 15, step 1): master-data and move events in commit order with a gapless
 * per-org sequence, entered/left along the tree, re-reads that are no events, the relay's copy on
 * the EVENTS stream, scopes and org isolation on GET /api/v1/events, and the report's as_of_seq.
 */
import t from 'tap';
import { allEvents, streamEvents } from '../helpers/events.js';
import { drained, natsClient, publish, scanBody } from '../helpers/scans.js';
import { eventually, startTrackd } from '../helpers/trackd.js';
import { expectError } from '../helpers/wire.js';

const trackd = await startTrackd(t);
const org = await trackd.createOrg('Events Org');
const other = await trackd.createOrg('Other Org');
const admin = (await trackd.createKey(org.id)).token;
const otherAdmin = (await trackd.createKey(other.id)).token;
const nc = await natsClient(t, trackd.natsUrl);
const BASE = Date.parse('2026-11-01T08:00:00.000Z');
const at = (s: number) => new Date(BASE + s * 1000).toISOString();
const ref = (e: { id: number; external_key: string }) => ({ id: e.id, external_key: e.external_key });

const post = async (path: string, body: unknown, token = admin) => {
  const res = await trackd.request('POST', path, { token, body });
  if (res.status !== 201 && res.status !== 200) throw new Error(`${path}: ${res.status} ${res.text}`);
  return res.json.data;
};

// Site > Building A > Room 1, Room 2; Site > Building B > Room 3.
const site = await post('/api/v1/locations', { external_key: 'SITE', name: 'Site' });
const buildingA = await post('/api/v1/locations', { external_key: 'BLD-A', name: 'Building A', parent_id: site.id });
const room1 = await post('/api/v1/locations', { external_key: 'R1', name: 'Room 1', parent_id: buildingA.id });
const room2 = await post('/api/v1/locations', { external_key: 'R2', name: 'Room 2', parent_id: buildingA.id });
const buildingB = await post('/api/v1/locations', { external_key: 'BLD-B', name: 'Building B', parent_id: site.id });
const room3 = await post('/api/v1/locations', { external_key: 'R3', name: 'Room 3', parent_id: buildingB.id });
const pallet = await post('/api/v1/assets', { external_key: 'PALLET', name: 'Pallet', tags: [{ tag_type: 'rfid', value: 'P1' }] });

t.test('master data and moves: one event each, in commit order, seq 1..n with no gaps', async (t) => {
  const subject = `scans.${org.id}.fixed`;
  await publish(nc, subject, scanBody('R1', ['rfid:P1'], at(0)));
  await publish(nc, subject, scanBody('R1', ['rfid:P1'], at(10))); // a re-read within the gap: no event
  await publish(nc, subject, scanBody('R2', ['rfid:P1'], at(20)));
  await publish(nc, subject, scanBody('R1', ['rfid:P1'], at(5))); // a late read: history only, no event
  await publish(nc, subject, scanBody('R3', ['rfid:P1'], at(30)));
  await publish(nc, subject, scanBody('R3', ['rfid:P1'], at(30 + 3600))); // past the gap at the same place: a visit, no move
  await drained(nc);
  await post(`/api/v1/assets/${pallet.id}/rename`, { external_key: 'PALLET-1' });
  const tag = await post(`/api/v1/assets/${pallet.id}/tags`, { tag_type: 'ble', value: 'B1' });
  const detached = await trackd.request('DELETE', `/api/v1/assets/${pallet.id}/tags/${tag.id}`, { token: admin });
  t.equal(detached.status, 204);
  const patched = await trackd.request('PATCH', `/api/v1/locations/${room2.id}`, { token: admin, body: { name: 'Raum Zwei – Süd ✓' } });
  t.equal(patched.status, 200);
  const gone = await post('/api/v1/locations', { external_key: 'GONE', name: 'Gone' });
  t.equal((await trackd.request('DELETE', `/api/v1/locations/${gone.id}`, { token: admin })).status, 204);
  const refused = await trackd.request('DELETE', `/api/v1/locations/${site.id}`, { token: admin });
  t.equal(refused.status, 409, 'a refused write');
  const crate = await post('/api/v1/assets', { name: 'Crate' });
  t.equal((await trackd.request('DELETE', `/api/v1/assets/${crate.id}`, { token: admin })).status, 204);

  const events = await allEvents(trackd, admin);
  t.same(
    events.map((e) => e.seq),
    events.map((_, i) => i + 1),
    'seq runs 1..n with no gaps',
  );
  t.same(
    events.map((e) => e.type),
    [
      ...Array(6).fill('location.created'),
      'asset.created',
      'asset.moved',
      'asset.moved',
      'asset.moved',
      'asset.updated',
      'tag.attached',
      'tag.detached',
      'location.updated',
      'location.created',
      'location.deleted',
      'asset.created',
      'asset.deleted',
    ],
    'one event per committed change, none for re-reads, late reads, new visits in place or refused writes',
  );
  const moves = events.filter((e) => e.type === 'asset.moved').map((e) => e.data);
  const [s, a, b, r1, r2, r3] = [site, buildingA, buildingB, room1, room2, room3].map(ref);
  t.same(moves[0], {
    asset: { id: pallet.id, external_key: 'PALLET' },
    from: null,
    to: r1,
    observed_at: at(0),
    entered: [s, a, r1],
    left: [],
  });
  t.same(
    moves[1],
    { asset: { id: pallet.id, external_key: 'PALLET' }, from: r1, to: r2, observed_at: at(20), entered: [r2], left: [r1] },
    'between two rooms of A: A is neither entered nor left',
  );
  t.same(moves[2], {
    asset: { id: pallet.id, external_key: 'PALLET' },
    from: r2,
    to: r3,
    observed_at: at(30),
    entered: [b, r3],
    left: [r2, a],
  });
  t.equal(events[10]!.data.asset.external_key, 'PALLET-1', 'a rename is asset.updated with the new key');
  t.same(events[11]!.data, { tag: { id: tag.id, tag_type: 'ble', value: 'B1' }, owner_type: 'asset', owner_id: pallet.id });
  t.same(events[15]!.data, { location: { id: gone.id, external_key: 'GONE' } });
  t.equal(new Set(events.map((e) => e.id)).size, events.length, 'every event id is unique');
  t.ok(
    events.every((e) => e.org_id === org.id && /^[0-9A-HJKMNP-TV-Z]{26}$/.test(e.id)),
    'ULID-shaped ids of this org',
  );

  // The relay's copy: every event once, in order, subject events.<org>.<type>, Nats-Msg-Id = id.
  const streamed = await eventually(async () => {
    const got = await streamEvents(nc, org.id);
    return got.length >= events.length ? got : undefined;
  });
  t.same(
    streamed.map((m) => m.event),
    events,
    'the EVENTS stream holds the log, each event once and in order',
  );
  t.ok(
    streamed.every((m) => m.subject === `events.${org.id}.${m.event.type}` && m.msgId === m.event.id && m.orgSeq === m.event.seq),
    'subjects events.<org>.<type>, Nats-Msg-Id the event id, Trackd-Seq the org sequence',
  );
  // The relay builds these messages in SQL; the envelope is the same text the API serves (key order, no spaces, UTF-8).
  t.ok(
    streamed.every((m) => m.text === JSON.stringify(m.event)),
    'each message is the envelope as JSON.stringify writes it, non-ASCII names included',
  );
  t.equal(streamed.find((m) => m.event.type === 'location.updated')?.event.data.location.name, 'Raum Zwei – Süd ✓');
  // A move's data is written by hand (src/events/log.ts moved): its keys in the schema's order.
  const node = (n: { id: number; external_key: string } | null) => (n === null ? null : { id: n.id, external_key: n.external_key });
  const inOrder = (d: any) => ({
    asset: node(d.asset),
    from: node(d.from),
    to: node(d.to),
    observed_at: d.observed_at,
    entered: d.entered.map(node),
    left: d.left.map(node),
  });
  const movesStreamed = streamed.filter((m) => m.event.type === 'asset.moved');
  t.equal(movesStreamed.length, 3);
  t.ok(
    movesStreamed.every((m) => m.text.endsWith(`"data":${JSON.stringify(inOrder(m.event.data))}}`)),
    'asset.moved: asset, from, to, observed_at, entered, left; each location id then external_key',
  );

  const page = await trackd.request('GET', '/api/v1/events?after=3&limit=2', { token: admin });
  t.same(
    page.json.data.map((e: { seq: number }) => e.seq),
    [4, 5],
  );
  t.equal(page.json.next_after, 5);
  t.equal(page.json.last_seq, events.length);
  const past = await trackd.request('GET', `/api/v1/events?after=${events.length + 10}`, { token: admin });
  t.same(past.json.data, [], 'after the head: an empty page');
});

t.test('scopes and org isolation', async (t) => {
  const movesOnly = (await trackd.createKey(org.id, ['tracking:read'])).token;
  const assetsOnly = (await trackd.createKey(org.id, ['assets:read'])).token;
  const locationsOnly = (await trackd.createKey(org.id, ['locations:read'])).token;
  const writer = (await trackd.createKey(org.id, ['assets:write'])).token;
  const types = async (token: string) => [...new Set((await allEvents(trackd, token)).map((e) => e.type))].sort();
  t.same(await types(movesOnly), ['asset.moved']);
  t.same(await types(assetsOnly), ['asset.created', 'asset.deleted', 'asset.updated', 'tag.attached', 'tag.detached']);
  t.same(await types(locationsOnly), ['location.created', 'location.deleted', 'location.updated']);
  await expectError(t, await trackd.request('GET', '/api/v1/events', { token: writer }), {
    status: 403,
    type: 'forbidden',
    instance: '/api/v1/events',
  });
  t.same(await allEvents(trackd, otherAdmin), [], "another org's key sees none of these events");
  await post('/api/v1/locations', { external_key: 'ELSEWHERE', name: 'Elsewhere' }, otherAdmin);
  const theirs = await allEvents(trackd, otherAdmin);
  t.same(
    theirs.map((e) => [e.seq, e.type, e.org_id]),
    [[1, 'location.created', other.id]],
    'each org has its own sequence from 1',
  );
});

t.test('the report carries the sequence it reflects', async (t) => {
  const before = await allEvents(trackd, admin);
  const report = await trackd.request('GET', '/api/v1/reports/asset-locations', { token: admin });
  t.equal(report.status, 200);
  t.equal(report.json.as_of_seq, before.at(-1)!.seq, 'as_of_seq is the last sequence');
  await publish(nc, `scans.${org.id}.fixed`, scanBody('R2', ['rfid:P1'], at(90_000)));
  await drained(nc);
  const next = await allEvents(trackd, admin, report.json.as_of_seq);
  t.same(
    next.map((e) => e.type),
    ['asset.moved'],
    'reading on from as_of_seq gives what happened since',
  );
});

t.test('bad cursors are validation errors', async (t) => {
  for (const [query, field] of [
    ['after=-1', 'after'],
    ['after=x', 'after'],
    ['limit=0', 'limit'],
    ['limit=1001', 'limit'],
  ]) {
    const res = await trackd.request('GET', `/api/v1/events?${query}`, { token: admin });
    expectError(t, res, { status: 400, type: 'validation_error', instance: '/api/v1/events', fields: res.json?.error?.fields });
    t.equal(res.json.error.fields[0].field, field, `${query}: names ${field}`);
  }
});
