/**
 * A commit wakes the event streams (issue 15, latency): the shard's thread notifies the HTTP
 * threads after each commit that appended events (a counter in shared memory), and a thread with
 * few streams polls at once. Here the poll is stretched to ten minutes (TRACKD_TEST_EVENT_POLL_MS),
 * so only the wake can bring these events: a scan's move and an HTTP write's event, over Server-Sent
 * Events and a WebSocket subscription, on both HTTP threads; and one commit of more events than a
 * poll reads at once (500): the poll reads on until it has them all.
 */
process.env.TRACKD_TEST_EVENT_POLL_MS = '600000';

import t from 'tap';
import { mustOpen } from '../helpers/eventSocket.js';
import { drained, publish, scanBody } from '../helpers/scans.js';
import { allEvents } from '../helpers/events.js';
import { openStream } from '../helpers/sse.js';
import { streamFixture } from '../helpers/streamFixture.js';

const { trackd, org, admin, nc, post, scan } = await streamFixture(t, 'Wake');
await post('/api/v1/locations', { external_key: 'K-DOCK', name: 'Dock' });
await post('/api/v1/locations', { external_key: 'K-YARD', name: 'Yard' });
await post('/api/v1/assets', { external_key: 'K-A1', name: 'A1', tags: [{ tag_type: 'rfid', value: 'KA1' }] });
const head = async () => (await allEvents(trackd, admin)).at(-1)!.seq;

t.test('with the poll at ten minutes, committed events still reach every stream', async (t) => {
  const start = await head();
  // Two of each: the kernel spreads connections over the two HTTP threads.
  const streams = [await openStream(trackd, { token: admin }), await openStream(trackd, { token: admin })];
  const sockets = [await mustOpen(trackd, { token: admin }), await mustOpen(trackd, { token: admin })];
  for (const socket of sockets) {
    socket.send({ op: 'subscribe', id: 'all', after: start });
    await socket.next('subscribed', 'all');
  }
  await scan('K-DOCK', 'KA1');
  await post('/api/v1/assets', { name: 'Woken 1' });
  await scan('K-YARD', 'KA1');
  const expected = [
    [start + 1, 'asset.moved'],
    [start + 2, 'asset.created'],
    [start + 3, 'asset.moved'],
  ];
  for (const [i, stream] of streams.entries())
    t.same(
      (await stream.waitFor(3)).map((e) => [e.seq, e.type]),
      expected,
      `SSE stream ${i + 1}`,
    );
  for (const [i, socket] of sockets.entries())
    t.same(
      (await socket.waitFor('all', 3)).map((e) => [e.seq, e.type]),
      expected,
      `WebSocket ${i + 1}`,
    );
  for (const stream of streams) stream.close();
  for (const socket of sockets) await socket.close();
});

t.test('one commit of 600 moves: the woken poll reads on past its 500 rows and delivers them all', async (t) => {
  const tags = Array.from({ length: 600 }, (_, i) => `KB${i}`);
  for (const value of tags) await post('/api/v1/assets', { name: value, tags: [{ tag_type: 'rfid', value }] });
  const start = await head();
  const stream = await openStream(trackd, { token: admin });
  // One scan message with 600 reads: one batch, one commit, 600 first placements.
  await publish(
    nc,
    `scans.${org.id}.fixed`,
    scanBody(
      'K-DOCK',
      tags.map((v) => `rfid:${v}`),
      new Date(),
    ),
  );
  await drained(nc);
  const got = await stream.waitFor(600);
  t.same(
    got.map((e) => e.seq),
    Array.from({ length: 600 }, (_, i) => start + i + 1),
    'all 600, in order, without another poll',
  );
  t.ok(
    got.every((e) => e.type === 'asset.moved'),
    'moves',
  );
  stream.close();
});
