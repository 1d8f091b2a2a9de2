/**
 * A commit wakes the event streams (issue 15, latency): the shard's thread notifies the HTTP
 * threads after each commit that appended events (a counter in shared memory), and a thread with
 * few streams polls at once. Here the poll is stretched to ten minutes (TRACKD_TEST_EVENT_POLL_MS),
 * so only the wake can bring these events: a scan's move and an HTTP write's event, over Server-Sent
 * Events and a WebSocket subscription, on both HTTP threads.
 */
process.env.TRACKD_TEST_EVENT_POLL_MS = '600000';

import t from 'tap';
import { mustOpen } from '../helpers/eventSocket.js';
import { allEvents } from '../helpers/events.js';
import { openStream } from '../helpers/sse.js';
import { streamFixture } from '../helpers/streamFixture.js';

const { trackd, admin, post, scan } = await streamFixture(t, 'Wake');
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
