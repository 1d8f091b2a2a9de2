/**
 * A scan consumer whose pull requests are lost (a network or a broker that drops them: seen in the
 * 3-node test after the nats-server leading a consumer was killed) ends its session once it has had
 * no delivery for SCAN_STALL_SECONDS while its consumer has messages to deliver, and pulls anew.
 * The loss is made by a proxy between trackd and its nats-server that drops the pulls on SCANS.
 */
import t from 'tap';
import { seed } from '../helpers/masterdata.js';
import { natsProxy } from '../helpers/natsProxy.js';
import { natsClient, publish, scanBody } from '../helpers/scans.js';
import { eventually, spawnTrackd, startNats, type Teardown } from '../helpers/trackd.js';

const PULLS = '$JS.API.CONSUMER.MSG.NEXT.SCANS.';

/** trackd (SCAN_STALL_SECONDS=1) behind a proxy that can lose its requests, one asset, and its visit count. */
async function stalledSetup(t: Teardown, orgName: string) {
  const nats = await startNats(t);
  const proxy = await natsProxy(t, nats.url);
  const trackd = await spawnTrackd(t, { env: { SHARDS: '1', HISTORY_GAP_SECONDS: '0', SCAN_STALL_SECONDS: '1' }, natsUrl: proxy.url });
  const org = await trackd.createOrg(orgName);
  const token = (await trackd.createKey(org.id)).token;
  const ids = await seed(trackd, token, { locations: [{ external_key: 'DOCK-1' }], assets: [{ external_key: 'A-1', tags: ['rfid:A1'] }] });
  const nc = await natsClient(t, nats.url);
  const visits = async () => {
    const res = await trackd.request('GET', `/api/v1/assets/${ids.assets['A-1']}/history?limit=1`, { token });
    return res.status === 200 ? (res.json.total_count as number) : -1;
  };
  const stallEnds = (reason: RegExp) =>
    trackd.logs().filter((l) => l.msg === 'scan consumer session ends; resuming from the ack floor' && reason.test(String(l.reason)));
  return { proxy, trackd, org, nc, visits, stallEnds, base: Date.now() - 60_000 };
}

t.test('pull requests lost: the idle session ends after SCAN_STALL_SECONDS, and the next one delivers', async (t) => {
  const { proxy, trackd, org, nc, visits, stallEnds: ends, base } = await stalledSetup(t, 'Stalled');
  const stallEnds = () => ends(/^no delivery for/);

  await publish(nc, `scans.${org.id}.fixed`, scanBody('DOCK-1', ['rfid:A1'], new Date(base)));
  await eventually(async () => (await visits()) === 1, 30_000, 50);
  t.equal(stallEnds().length, 0, 'a session that delivers is not ended as stalled');

  // The stream is caught up: nothing was pending as of the last delivery. Then the pulls are lost.
  proxy.lose(PULLS);
  let at = Date.now();
  await trackd.restart();
  await eventually(() => proxy.lost() > 0, 30_000, 50);
  t.comment(`restarted, first pull lost after ${Date.now() - at} ms`);
  at = Date.now();
  await publish(nc, `scans.${org.id}.fixed`, scanBody('DOCK-1', ['rfid:A1'], new Date(base + 1000)));
  const ended = await eventually(() => stallEnds().length > 0 && stallEnds(), 30_000, 50);
  t.comment(`ended as stalled ${Date.now() - at} ms after the publish`);
  t.match(String(ended[0]!.reason), /with 1 messages pending/, `the stalled session ended: ${ended[0]!.reason}`);
  t.equal(await visits(), 1, 'nothing was delivered while the pulls were lost');

  proxy.lose(undefined);
  const resumed = Date.now();
  await eventually(async () => (await visits()) === 2, 30_000, 50);
  t.equal(await visits(), 2, 'once pulls get through, the next session delivers the scan, once');
  t.comment(`delivered ${Date.now() - resumed} ms after the pulls got through; ${stallEnds().length} sessions ended as stalled`);
});

t.test("pull requests and the consumer's state both unanswered: the idle session still ends, and the next one delivers", async (t) => {
  const { proxy, trackd, org, nc, visits, stallEnds, base } = await stalledSetup(t, 'Unanswered');
  const unreadableEnds = () => stallEnds(/state unreadable/);
  await publish(nc, `scans.${org.id}.fixed`, scanBody('DOCK-1', ['rfid:A1'], new Date(base)));
  await eventually(async () => (await visits()) === 1, 30_000, 50);

  // A session whose pulls are lost, then every consumer request (its state too) from then on.
  proxy.lose(PULLS);
  await trackd.restart();
  await eventually(() => proxy.lost() > 0, 30_000, 50);
  proxy.lose('$JS.API.CONSUMER.');
  const at = Date.now();
  await publish(nc, `scans.${org.id}.fixed`, scanBody('DOCK-1', ['rfid:A1'], new Date(base + 1000)));
  const ended = await eventually(() => unreadableEnds().length > 0 && unreadableEnds(), 30_000, 50);
  t.comment(`ended ${Date.now() - at} ms after the publish: ${ended[0]!.reason}`);
  t.match(
    String(ended[0]!.reason),
    /^no delivery for \d+ s and the consumer's state unreadable/,
    'the session ended though its state could not be read',
  );
  t.equal(await visits(), 1, 'nothing was delivered meanwhile');

  proxy.lose(undefined);
  await eventually(async () => (await visits()) === 2, 60_000, 50);
  t.equal(await visits(), 2, 'once the broker answers, a session delivers the scan, once');
});
