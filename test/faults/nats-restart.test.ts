import t from 'tap';
import { startNatsServer } from '../../src/nats/embedded.js';
import { drained, natsClient } from '../helpers/scans.js';
import { ASSETS, setupFaultOrg as setup, sum, sustainedPublisher } from '../helpers/ingestLoad.js';
import { historyCounts } from '../helpers/scanMix.js';
import { eventually, startNats } from '../helpers/trackd.js';

/**
 * Faults during a sustained ingest (a publisher running at a steady rate the whole time, not a
 * backlog): trackd killed -9 several times, and the nats-server stopped and restarted. Afterwards
 * the history holds exactly one event per scan JetStream acknowledged (HISTORY_GAP_SECONDS=0).
 */

t.test('nats-server stopped and restarted during a sustained ingest: published equals applied', async (t) => {
  const nats = await startNats(t);
  const { trackd, org, token, ids } = await setup(t, nats.url);
  const nc = await natsClient(t, nats.url);
  const publisher = sustainedPublisher(nc, `scans.${org.id}.fixed`, 'DOCK-1', ASSETS, {
    perTick: 20,
    tickMs: 20,
    base: Date.now() - 86_400_000,
    prefix: 'nats',
  });
  await publisher.progressed(1000);
  const ackedAtStop = publisher.acked();
  await nats.stop();
  await eventually(async () => (await trackd.request('GET', '/readyz')).status === 503, 10_000);
  t.equal((await trackd.request('GET', '/readyz')).json.consumer, false, 'not ready while the broker is away');
  const health = await trackd.request('GET', '/api/v1/locations', { token });
  t.equal(health.status, 200, 'the HTTP API keeps serving reads while the broker is away');
  await publisher.retried(3);
  const again = await startNatsServer({ storeDir: nats.storeDir, port: nats.port, serverName: 'restarted' });
  t.teardown(() => again.stop());
  await eventually(async () => (await trackd.request('GET', '/readyz')).status === 200, 20_000, 100);
  await publisher.progressed(1000);
  await publisher.stop();
  const published = publisher.acked();
  t.ok(
    published > ackedAtStop,
    `publishing resumed after the restart (${ackedAtStop} before the stop, ${published} in all, ${publisher.retries()} retries)`,
  );
  await drained(nc);
  const applied = await historyCounts(trackd, token, ids.assets);
  t.comment(`nats restart: published ${published}, applied ${sum(applied)}`);
  t.same(
    applied,
    Object.fromEntries(Object.values(ASSETS).map((k) => [k, publisher.perAsset()[k] ?? 0])),
    'history events per asset equal scans published per asset',
  );
  t.equal(sum(applied), published, 'applied equals published');
});
