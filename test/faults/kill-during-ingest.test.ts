import t from 'tap';
import { drained, natsClient } from '../helpers/scans.js';
import { ASSETS, setupFaultOrg as setup, sum, sustainedPublisher } from '../helpers/ingestLoad.js';
import { historyCounts } from '../helpers/scanMix.js';
import { eventually, startNats } from '../helpers/trackd.js';

/**
 * Faults during a sustained ingest (a publisher running at a steady rate the whole time, not a
 * backlog): trackd killed -9 several times (faults/nats-restart.test.ts: the nats-server restarted). Afterwards
 * the history holds exactly one event per scan JetStream acknowledged (HISTORY_GAP_SECONDS=0).
 */

t.test('kill -9 three times during a sustained ingest: published equals applied, no loss, no duplicates', async (t) => {
  const nats = await startNats(t);
  const { trackd, org, token, ids } = await setup(t, nats.url, { childProcess: true });
  const nc = await natsClient(t, nats.url);
  const publisher = sustainedPublisher(nc, `scans.${org.id}.fixed`, 'DOCK-1', ASSETS, {
    perTick: 20,
    tickMs: 20,
    base: Date.now() - 86_400_000,
    prefix: 'kill',
  });
  const kills: string[] = [];
  for (let k = 0; k < 3; k++) {
    await publisher.progressed(1000);
    const before = sum(await historyCounts(trackd, token, ids.assets));
    trackd.process.kill('SIGKILL');
    await eventually(() => trackd.process.signalCode === 'SIGKILL', 5000);
    kills.push(`kill ${k + 1}: ${publisher.acked()} acked, ${before} applied`);
    await trackd.restart();
  }
  await publisher.progressed(500);
  await publisher.stop();
  const published = publisher.acked();
  t.comment(kills.join('; '));
  t.ok(published > 1000, `${published} scans published during the run (${publisher.retries()} publish retries)`);
  await drained(nc);
  const applied = await historyCounts(trackd, token, ids.assets);
  t.comment(`kill -9 x3: published ${published}, applied ${sum(applied)}`);
  t.same(
    applied,
    Object.fromEntries(Object.values(ASSETS).map((k) => [k, publisher.perAsset()[k] ?? 0])),
    'history events per asset equal scans published per asset',
  );
  t.equal(sum(applied), published, 'applied equals published');
  t.equal((await trackd.request('GET', '/readyz')).status, 200, 'ready after the last restart');
});
