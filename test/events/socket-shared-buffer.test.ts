/**
 * The subscriptions of one WebSocket share its send buffer: while one of them has filled it (the
 * client not reading), an event of another subscription must still reach the client once it reads
 * again, never be skipped (the hub moves a subscription's cursor past an event as it hands it over).
 */
import t from 'tap';
import { mustOpen } from '../helpers/eventSocket.js';
import { startTrackd } from '../helpers/trackd.js';

// One HTTP thread: one hub, so the observer and the blocked socket are fed by the same polls.
// A generous slow limit: the blocked socket must stay open while the test fills it.
const trackd = await startTrackd(t, { env: { EVENT_STREAM_SLOW_SECONDS: '120', HTTP_THREADS: '1' } });
const org = await trackd.createOrg('Shared Buffer Org');
const admin = (await trackd.createKey(org.id)).token;
const post = async (path: string, body: unknown) => {
  const res = await trackd.http('POST', path, { token: admin, body });
  if (res.status !== 201) throw new Error(`${path}: ${res.status} ${res.text}`);
  return res.json.data;
};

t.test("an event of one subscription while another filled the socket's buffer is delivered once the client reads", async (t) => {
  const socket = await mustOpen(trackd, { token: admin });
  socket.send({ op: 'subscribe', id: 'big', types: ['asset.created'] });
  socket.send({ op: 'subscribe', id: 'locs', types: ['location.created'] });
  await socket.next('subscribed', 'big');
  await socket.next('subscribed', 'locs');
  const observer = await mustOpen(trackd, { token: admin });
  observer.send({ op: 'subscribe', id: 'locs', types: ['location.created'] });
  await observer.next('subscribed', 'locs');

  const raw = (socket.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket;
  raw.pause();
  const started = performance.now();
  // About 22 MB of asset.created events: more than loopback's buffers and the socket's high-water mark.
  const big = 'x'.repeat(900_000);
  for (let i = 0; i < 25; i++) await post('/api/v1/assets', { name: `Big ${i}`, metadata: { big } });
  t.comment(`big events posted at ${Math.round(performance.now() - started)} ms`);
  const during = await post('/api/v1/locations', { external_key: 'DURING', name: 'During the block' });
  // The observer got it: the poll that handed it over has passed the blocked socket's subscription too.
  await observer.waitFor('locs', 1, 30_000);
  t.comment(`the observer got it at ${Math.round(performance.now() - started)} ms`);
  raw.resume();
  const after = await post('/api/v1/locations', { external_key: 'AFTER', name: 'After the block' });
  const got = await socket.waitFor('locs', 2, 60_000).catch(() => socket.events('locs'));
  t.same(
    got.map((e) => e.data.location.id),
    [during.id, after.id],
    'both locations, the one created while the buffer was full first',
  );
  t.equal((await socket.waitFor('big', 25, 60_000)).length, 25, 'and every big event, once the client read them');
  await observer.close();
  await socket.close();
});
