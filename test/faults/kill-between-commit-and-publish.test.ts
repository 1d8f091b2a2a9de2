/**
 * The event relay killed -9 around a publish (TRACKD_TEST_RELAY_KILL=before:<type> kills the process
 * after the change committed and before its event is published; after:<type> once JetStream has
 * acknowledged it and before the relay saved its position). After the restart the EVENTS stream
 * holds every event of the log exactly once, in order. The stream is created here with a duplicate
 * window of 100 ms, so a re-publish after the restart would not be dropped by JetStream: exactly
 * once rests on the relay alone.
 */
import { jetstreamManager, StorageType } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import t from 'tap';
import { allEvents, streamEvents } from '../helpers/events.js';
import { natsClient } from '../helpers/scans.js';
import { eventually, spawnTrackd, startNats, type Trackd } from '../helpers/trackd.js';

const KILL = 'TRACKD_TEST_RELAY_KILL';
const ENV = { SHARDS: '1', HTTP_THREADS: '1' };

const ok = (res: { status: number; text: string; json: any }, status: number, what: string) => {
  if (res.status !== status) throw new Error(`${what}: ${res.status} ${res.text}`);
  return res.json?.data;
};

async function killed(trackd: Trackd): Promise<void> {
  await eventually(() => trackd.process.signalCode === 'SIGKILL', 10_000);
  delete trackd.env[KILL];
}

for (const when of ['before', 'after'] as const) {
  t.test(`killed ${when} publishing: after the restart the stream holds every event once, in order`, async (t) => {
    const nats = await startNats(t);
    const nc = await natsClient(t, nats.url);
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: 'EVENTS', subjects: ['events.>'], storage: StorageType.File, duplicate_window: nanos(100) });
    const trackd = await spawnTrackd(t, { natsUrl: nats.url, env: { ...ENV, [KILL]: `${when}:asset.created` } });
    const org = await trackd.createOrg('Relay crash');
    const { token } = await trackd.createKey(org.id);
    ok(await trackd.request('POST', '/api/v1/locations', { token, body: { external_key: 'DOCK', name: 'Dock' } }), 201, 'dock');
    await eventually(async () => (await streamEvents(nc, org.id)).length === 1);
    // Committed (the answer may or may not get out before the relay kills the process).
    await trackd.request('POST', '/api/v1/assets', { token, body: { name: 'Crate', external_key: 'CRATE' } }).catch(() => undefined);
    await killed(trackd);
    const held = (await streamEvents(nc, org.id)).map((m) => m.event.type);
    t.same(
      held,
      when === 'before' ? ['location.created'] : ['location.created', 'asset.created'],
      when === 'before' ? 'the create committed but was not published' : 'the create was published before the kill',
    );

    await trackd.restart();
    const log = await allEvents(trackd, token);
    t.same(
      log.map((e) => e.type),
      ['location.created', 'asset.created'],
      'the log holds both changes',
    );
    const created = ok(await trackd.request('POST', '/api/v1/assets', { token, body: { name: 'Box', external_key: 'BOX' } }), 201, 'box');
    t.ok(created.id > 0, 'a write after the restart');
    // The relay publishes in commit order: once seq 3 is in the stream, a second copy of 2 would be too.
    const final = await eventually(async () => {
      const got = await streamEvents(nc, org.id);
      return got.some((m) => m.orgSeq === 3) ? got : undefined;
    });
    t.same(
      final.map((m) => m.orgSeq),
      [1, 2, 3],
      'the stream holds seq 1, 2, 3 exactly once, in order',
    );
    t.same(
      final.map((m) => m.event),
      await allEvents(trackd, token),
      'and they are the log',
    );
  });
}
