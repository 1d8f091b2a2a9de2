import t from 'tap';
import { seed } from '../helpers/masterdata.js';
import { drained, natsClient, publishAll, scanBody } from '../helpers/scans.js';
import { spawnTrackd, startNats } from '../helpers/trackd.js';

/**
 * With a backlog, the consumer sends a full batch behind the one its shard is applying
 * (laneScheduler.ts). Here the shard's first batch fails once (TRACKD_TEST_FAIL_FIRST_BATCHES) while
 * the second is already in its mailbox: the shard must refuse the second (ApplyOptions.afterSeq),
 * or the second would move the applied sequence past the first's messages and their retry would
 * be taken for a redelivery, losing them. Every scan is applied exactly once.
 */
t.test('the first of two batches in flight fails: the second is refused, both retried in order, nothing lost or doubled', async (t) => {
  const nats = await startNats(t);
  const trackd = await spawnTrackd(t, {
    natsUrl: nats.url,
    env: { SHARDS: '1', HISTORY_GAP_SECONDS: '0', TRACKD_TEST_MAX_BATCH: '5', TRACKD_TEST_FAIL_FIRST_BATCHES: '1' },
  });
  const org = await trackd.createOrg('Batches In Flight');
  const token = (await trackd.createKey(org.id)).token;
  const ids = await seed(trackd, token, {
    locations: [{ external_key: 'DOCK-1' }, { external_key: 'DOCK-2' }],
    assets: [{ external_key: 'PALLET-1', tags: ['rfid:F1'] }],
  });
  const nc = await natsClient(t, nats.url);
  await trackd.stop();

  // A backlog of eight full batches (5 scans each), alternating docks so that each scan is a move.
  const SCANS = 40;
  const base = Date.now() - 3_600_000;
  await publishAll(
    nc,
    `scans.${org.id}.fixed`,
    Array.from({ length: SCANS }, (_, i) => scanBody(i % 2 === 0 ? 'DOCK-1' : 'DOCK-2', ['rfid:F1'], new Date(base + i * 1000))),
  );
  await trackd.restart();
  await drained(nc);

  const metrics = (await trackd.request('GET', '/metrics')).text;
  const failures = [...metrics.matchAll(/^trackd_scan_batch_failures_total\{[^}]*\} (\d+)$/gm)].reduce((n, m) => n + Number(m[1]), 0);
  t.ok(failures >= 2, `the first batch failed and the one behind it was refused (${failures} batch failures)`);
  const refused = trackd.logs().filter((l) => /before this one .* is not applied/.test(String(l.err ?? '')));
  t.ok(refused.length >= 1, `the shard refused a batch sent behind the failed one (${refused.length} logged)`);
  const history = await trackd.request('GET', `/api/v1/assets/${ids.assets['PALLET-1']}/history?limit=100`, { token });
  t.equal(history.json.total_count, SCANS, 'every scan applied exactly once');
  const at = await trackd.request('GET', `/api/v1/reports/asset-locations?asset_id=${ids.assets['PALLET-1']}`, { token });
  t.equal(at.json.data[0].location_external_key, 'DOCK-2', 'the last scan decides the current location');
});
