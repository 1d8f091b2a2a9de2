/**
 * A location filter selects the same events on every transport (issue 15): the events about the
 * location's subtree, its locations' deletions included, and the events about a location deleted
 * since (moves from or to it, its tags) whenever they are read. One table of changes, each marked
 * with whether a filter on SITE selects its event; a Server-Sent Events stream, a WebSocket
 * subscription and a webhook all read the log from before the changes and must get exactly the
 * marked events, in order.
 */
import t from 'tap';
import { Webhook } from 'standardwebhooks';
import { EVENT_TYPES } from '../../src/events/types.js';
import { allEvents } from '../helpers/events.js';
import { mustOpen } from '../helpers/eventSocket.js';
import { drained, natsClient, publish, scanBody } from '../helpers/scans.js';
import { openStream } from '../helpers/sse.js';
import { eventually, startTrackd } from '../helpers/trackd.js';
import { createWebhook, FAST_RETRIES, startReceiver, WEBHOOK_SCOPES } from '../helpers/webhooks.js';

const trackd = await startTrackd(t, { env: { ...FAST_RETRIES, HTTP_THREADS: '2' } });
const org = await trackd.createOrg('Location Filter Org');
const token = (await trackd.createKey(org.id, WEBHOOK_SCOPES)).token;
const nc = await natsClient(t, trackd.natsUrl);

const send = async (method: string, path: string, body?: unknown) => {
  const contentType = method === 'PATCH' ? 'application/merge-patch+json' : undefined;
  const res = await trackd.request(method, path, { token, body, contentType });
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${res.text}`);
  return res.json?.data;
};
const base = Date.now() - 3_600_000;
let minute = 0;
const scan = async (location: string, tag: string) => {
  await publish(nc, `scans.${org.id}.fixed`, scanBody(location, [`rfid:${tag}`], new Date(base + ++minute * 60_000)));
  await drained(nc);
};

const site = await send('POST', '/api/v1/locations', { external_key: 'F-SITE', name: 'Site' });
const room = await send('POST', '/api/v1/locations', { external_key: 'F-ROOM', name: 'Room', parent_id: site.id });
const shelf = await send('POST', '/api/v1/locations', { external_key: 'F-SHELF', name: 'Shelf', parent_id: room.id });
const yard = await send('POST', '/api/v1/locations', { external_key: 'F-YARD', name: 'Yard' });
const asset = await send('POST', '/api/v1/assets', { external_key: 'F-A', name: 'A', tags: [{ tag_type: 'rfid', value: 'FA' }] });
const head = (await allEvents(trackd, token)).at(-1)!.seq;

const ids = new Map<string, number>();
// [what happens, its event type, whether a filter on SITE selects it]
const changes: [string, () => Promise<unknown>, string, boolean][] = [
  [
    'a bin created under the room',
    async () => ids.set('bin', (await send('POST', '/api/v1/locations', { external_key: 'F-BIN', name: 'Bin', parent_id: room.id })).id),
    'location.created',
    true,
  ],
  [
    'a root created elsewhere',
    () => send('POST', '/api/v1/locations', { external_key: 'F-GATE', name: 'Gate' }),
    'location.created',
    false,
  ],
  ['the asset placed on the shelf', () => scan('F-SHELF', 'FA'), 'asset.moved', true],
  [
    'the shelf tagged',
    () => send('POST', `/api/v1/locations/${shelf.id}/tags`, { tag_type: 'rfid', value: 'F-SHELF-TAG' }),
    'tag.attached',
    true,
  ],
  ['the asset moved from the shelf to the yard', () => scan('F-YARD', 'FA'), 'asset.moved', true],
  ['the bin renamed', () => send('PATCH', `/api/v1/locations/${ids.get('bin')}`, { name: 'Bin!' }), 'location.updated', true],
  ['the bin deleted (a leaf below the room)', () => send('DELETE', `/api/v1/locations/${ids.get('bin')}`), 'location.deleted', true],
  ['the shelf deleted (after it held the asset)', () => send('DELETE', `/api/v1/locations/${shelf.id}`), 'location.deleted', true],
  ['the asset moved from the yard to the gate', () => scan('F-GATE', 'FA'), 'asset.moved', false],
  ['the asset renamed', () => send('PATCH', `/api/v1/assets/${asset.id}`, { name: 'A!' }), 'asset.updated', false],
  ['the room deleted (its children deleted before)', () => send('DELETE', `/api/v1/locations/${room.id}`), 'location.deleted', true],
  ['the yard deleted (after it held the asset)', () => send('DELETE', `/api/v1/locations/${yard.id}`), 'location.deleted', false],
];
for (const [, change] of changes) await change();
await drained(nc);

const log = await allEvents(trackd, token, head);
t.same(
  log.map((e) => e.type),
  changes.map(([, , type]) => type),
  'each change made one event',
);
const selected = log.filter((_, i) => changes[i]![3]);
const expected = selected.map((e) => e.seq);

t.test('Server-Sent Events: ?location_id= from a cursor before the changes', async (t) => {
  const stream = await openStream(trackd, { token, query: `?after=${head}&location_id=${site.id}` });
  const got = await stream.waitFor(expected.length);
  stream.close();
  for (const [i, e] of got.entries()) t.equal(e.seq, expected[i], `${changes[log.findIndex((l) => l.seq === expected[i])]![0]}`);
  t.same(got, selected, 'exactly the selected events, in order');
});

t.test('WebSocket: a subscription with location_id from a cursor before the changes', async (t) => {
  const socket = await mustOpen(trackd, { token });
  socket.send({ op: 'subscribe', id: 'site', after: head, location_id: site.id });
  await socket.next('subscribed', 'site');
  const got = await socket.waitFor('site', expected.length);
  for (const [i, e] of got.entries()) t.equal(e.seq, expected[i], `${changes[log.findIndex((l) => l.seq === expected[i])]![0]}`);
  t.same(got, selected, 'exactly the selected events, in order');
  // Nothing else follows: the next event (an asset created elsewhere) is not selected either.
  await send('POST', '/api/v1/assets', { name: 'Elsewhere' });
  socket.send({ op: 'subscribe', id: 'all', after: log.at(-1)!.seq });
  await socket.waitFor('all', 1);
  t.equal(socket.events('site').length, expected.length, 'no event beyond the selected');
  await socket.close();
});

t.test('webhook: filters.location_id, every event type, from a cursor before the changes', async (t) => {
  const receiver = await startReceiver(t);
  const hook = await createWebhook(trackd, token, {
    url: receiver.url,
    event_types: [...EVENT_TYPES],
    filters: { location_id: site.id },
    after: head,
  });
  await eventually(() => receiver.received.length >= expected.length);
  for (const r of receiver.received) new Webhook(hook.secret).verify(r.body, r.headers as Record<string, string>);
  const got = receiver.received.map((r) => r.json);
  for (const [i, e] of got.entries()) t.equal(e.seq, expected[i], `${changes[log.findIndex((l) => l.seq === expected[i])]![0]}`);
  t.same(got, selected, 'exactly the selected events, in order');
  // The endpoint's cursor at the log's end: every later event was looked at and not sent.
  await eventually(async () => (await send('GET', `/api/v1/webhooks/${hook.id}`)).last_delivered_seq >= log.at(-1)!.seq);
  t.equal(receiver.received.length, expected.length, 'nothing else was delivered');
  await trackd.request('DELETE', `/api/v1/webhooks/${hook.id}`, { token });
});
