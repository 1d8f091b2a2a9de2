import t from 'tap';
import type { NatsConnection } from '@nats-io/transport-node';
import { startNatsServer } from '../../src/nats/embedded.js';
import { seed } from '../helpers/masterdata.js';
import { drained, metric, natsClient, publish, scanBody } from '../helpers/scans.js';
import { eventually, startNats, spawnTrackd, type Teardown, type Trackd } from '../helpers/trackd.js';

const BASE = Date.now() - 86_400_000;

/** Publishes scans `from`..`to`-1, each reading both assets at BASE + i ms, in concurrent chunks. */
async function publishRange(nc: NatsConnection, orgId: number, from: number, to: number, onProgress?: (i: number) => void): Promise<void> {
  for (let i = from; i < to; i += 200) {
    const chunk: Promise<unknown>[] = [];
    for (let j = i; j < Math.min(i + 200, to); j++) {
      chunk.push(
        publish(nc, `scans.${orgId}.fixed`, scanBody('DOCK-1', ['rfid:K1', 'rfid:K2'], new Date(BASE + j), { event_id: `evt-${j}` })),
      );
    }
    await Promise.all(chunk);
    onProgress?.(i);
  }
}

async function historyCount(trackd: Trackd, token: string, assetId: number): Promise<number> {
  const res = await trackd.request('GET', `/api/v1/assets/${assetId}/history?limit=1`, { token });
  return res.status === 200 ? res.json.total_count : -1;
}

async function setup(t: Teardown, natsUrl?: string) {
  const trackd = await spawnTrackd(t, { env: { HISTORY_GAP_SECONDS: '0', SHARDS: '1' }, natsUrl });
  const org = await trackd.createOrg('Recovery');
  const token = (await trackd.createKey(org.id)).token;
  const ids = await seed(trackd, token, {
    locations: [{ external_key: 'DOCK-1' }],
    assets: [
      { external_key: 'K-1', tags: ['rfid:K1'] },
      { external_key: 'K-2', tags: ['rfid:K2'] },
    ],
  });
  return { trackd, org, token, ids };
}

t.test('kill -9 while a backlog drains: after restart every scan is in the history exactly once', async (t) => {
  const { trackd, org, token, ids } = await setup(t);
  const nc = await natsClient(t, trackd.natsUrl);
  // More than one batch (at most 10,000 scans each), so that the kill falls between two commits.
  const total = 20_000;
  await trackd.stop();
  await publishRange(nc, org.id, 0, total);
  await trackd.restart();
  // Kill as soon as the consumer is seen applying: it holds delivered, unacked messages then.
  const appliedAtKill = await eventually(
    async () => {
      const n = await metric(trackd, 'trackd_scans_applied_total');
      return n > 0 ? n : false;
    },
    20_000,
    5,
  );
  trackd.process.kill('SIGKILL');
  t.ok(appliedAtKill < total, `killed mid-drain (${appliedAtKill} of ${total} applied)`);
  await eventually(() => trackd.process.signalCode !== null, 5000);
  await trackd.restart();
  await drained(nc);
  t.equal(await historyCount(trackd, token, ids.assets['K-1']!), total);
  t.equal(await historyCount(trackd, token, ids.assets['K-2']!), total);
  const first = await trackd.request('GET', `/api/v1/assets/${ids.assets['K-1']}/history?sort=event_observed_at&limit=1`, { token });
  t.equal(first.json.data[0].event_observed_at, new Date(BASE).toISOString());
  t.equal(await metric(trackd, 'trackd_scans_in_hand'), 0);
});

t.test('a nats-server restart while a backlog drains: the consumer reconnects and nothing is lost or doubled', async (t) => {
  const nats = await startNats(t);
  const { trackd, org, token, ids } = await setup(t, nats.url);
  const nc = await natsClient(t, nats.url);
  // More than one batch (at most 10,000 scans each), so that the stop falls between two commits.
  const total = 20_000;
  await trackd.stop();
  await publishRange(nc, org.id, 0, total);
  await trackd.restart();
  const appliedAtStop = await eventually(
    async () => {
      const n = await metric(trackd, 'trackd_scans_applied_total');
      return n > 0 ? n : false;
    },
    20_000,
    5,
  );
  await nats.stop();
  t.ok(appliedAtStop < total, `nats-server stopped mid-drain (${appliedAtStop} of ${total} applied)`);
  await eventually(async () => (await trackd.request('GET', '/readyz')).status === 503, 10_000);
  const again = await startNatsServer({ storeDir: nats.storeDir, port: nats.port, serverName: 'restarted' });
  t.teardown(() => again.stop());
  await eventually(async () => (await trackd.request('GET', '/readyz')).status === 200, 20_000);
  await publishRange(nc, org.id, total, total + 500);
  await drained(nc);
  t.equal(await historyCount(trackd, token, ids.assets['K-1']!), total + 500);
  t.equal(await historyCount(trackd, token, ids.assets['K-2']!), total + 500);
});

t.test('visit ids go on after a restart: no visit takes the id of one before it', async (t) => {
  const { trackd, org, token, ids } = await setup(t);
  const nc = await natsClient(t, trackd.natsUrl);
  const at = (i: number) => new Date(BASE + 3_600_000 + i * 1000);
  // HISTORY_GAP_SECONDS=0: each scan opens a visit of its own.
  for (const i of [0, 1]) await publish(nc, `scans.${org.id}.fixed`, scanBody('DOCK-1', ['rfid:K1'], at(i), { event_id: `ids-${i}` }));
  await drained(nc);
  await trackd.restart();
  await publish(nc, `scans.${org.id}.fixed`, scanBody('DOCK-1', ['rfid:K1'], at(2), { event_id: 'ids-2' }));
  await drained(nc);
  const res = await trackd.request('GET', `/api/v1/assets/${ids.assets['K-1']}/history?sort=event_observed_at`, { token });
  t.equal(res.status, 200);
  t.same(
    res.json.data.map((v: { event_observed_at: string; last_seen_at: string; read_count: number }) => [
      v.event_observed_at,
      v.last_seen_at,
      v.read_count,
    ]),
    [0, 1, 2].map((i) => [at(i).toISOString(), at(i).toISOString(), 1]),
    // A visit drawn with an id an earlier visit has would be taken for the open one (its figures shown on both).
    'three visits, each with its own figures',
  );
});
