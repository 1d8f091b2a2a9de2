import t from 'tap';
import { type SeedSpec, seed } from '../helpers/masterdata.js';
import { natsClient, publish, scanBody } from '../helpers/scans.js';
import { eventually, spawnTrackd, startNats, type Teardown, type Trackd } from '../helpers/trackd.js';

/**
 * No SQLite index holds scan_positions.location_id (shard migration 020): the report index names
 * the positions at a location, for the report's SQLite side and for the location delete rule.
 */

const DELAY_MS = 1500;

/** One trackd (one shard, no visit gap, `env` added) on its own nats-server, an org seeded as `spec`, and a scan publisher. */
async function setUp(t: Teardown, name: string, env: Record<string, string>, spec: SeedSpec) {
  const nats = await startNats(t);
  const trackd = await spawnTrackd(t, { natsUrl: nats.url, env: { SHARDS: '1', HISTORY_GAP_SECONDS: '0', ...env } });
  const org = await trackd.createOrg(name);
  const token = (await trackd.createKey(org.id)).token;
  const ids = await seed(trackd, token, spec);
  const nc = await natsClient(t, nats.url);
  const subject = `scans.${org.id}.fixed`;
  const scan = (location: string, tag: string, at: Date) => publish(nc, subject, scanBody(location, [tag], at));
  return { trackd, token, ids, scan };
}

async function locationOf(trackd: Trackd, token: string, assetId: number): Promise<string | undefined> {
  const res = await trackd.request('GET', `/api/v1/reports/asset-locations?asset_id=${assetId}`, { token });
  return res.json?.data?.[0]?.location_external_key;
}

t.test('a location filter through SQLite sees a move committed between the report index answer and the read', async (t) => {
  // The reading thread pauses between the report index's answer and its own read transaction.
  const { trackd, token, ids, scan } = await setUp(
    t,
    'Location Members',
    { TRACKD_TEST_MEMBERS_DELAY_MS: String(DELAY_MS) },
    {
      locations: [{ external_key: 'DOCK-A' }, { external_key: 'DOCK-B' }, { external_key: 'YARD' }],
      assets: [
        { external_key: 'STAYS', tags: ['rfid:E1'] },
        { external_key: 'ARRIVES', tags: ['rfid:E2'] },
      ],
    },
  );
  const base = Date.now() - 60_000;
  await scan('DOCK-A', 'rfid:E1', new Date(base));
  await scan('YARD', 'rfid:E2', new Date(base + 1000));
  await eventually(async () => (await locationOf(trackd, token, ids.assets.ARRIVES!)) === 'YARD', 10_000);

  // Two locations: the report index does not page this, the SQLite side does, with the positions it names.
  const both = `/api/v1/reports/asset-locations?location_id=${ids.locations['DOCK-A']}&location_id=${ids.locations['DOCK-B']}&limit=50`;
  const started = Date.now();
  const report = trackd.request('GET', both, { token }).then((res) => ({ res, at: Date.now() }));
  // While that thread waits, ARRIVES moves into DOCK-B and is committed.
  await new Promise((resolve) => setTimeout(resolve, 200));
  await scan('DOCK-B', 'rfid:E2', new Date(base + 2000));
  await eventually(async () => (await locationOf(trackd, token, ids.assets.ARRIVES!)) === 'DOCK-B', DELAY_MS);
  const movedAt = Date.now();
  const { res, at } = await report;

  t.equal(res.status, 200, res.text);
  t.ok(movedAt < at, 'the move was committed before the report read its rows');
  t.same(
    res.json.data
      .map((r: { asset_external_key: string; location_external_key: string }) => [r.asset_external_key, r.location_external_key])
      .sort(),
    [
      ['ARRIVES', 'DOCK-B'],
      ['STAYS', 'DOCK-A'],
    ],
    'the page holds the asset that arrived after the report index answered',
  );
  t.equal(res.json.total_count, 2, 'and counts it');
  t.ok(at - started >= 2 * DELAY_MS, `the changed event sequence sent the reader back to the report index (${at - started} ms)`);

  const keyed = await trackd.request(
    'GET',
    '/api/v1/reports/asset-locations?location_external_key=DOCK-A&location_external_key=YARD&sort=asset_external_key',
    { token },
  );
  t.same(
    keyed.json.data.map((r: { asset_external_key: string }) => r.asset_external_key),
    ['STAYS'],
    'location_external_key through SQLite: the same positions',
  );
});

t.test('location_external_key through SQLite: a key given to another location before the report index answered', async (t) => {
  // The reading thread pauses between resolving the keys and asking the report index.
  const { trackd, token, ids, scan } = await setUp(
    t,
    'Location Keys',
    { TRACKD_TEST_KEYS_DELAY_MS: String(DELAY_MS) },
    {
      locations: [{ external_key: 'GATE' }, { external_key: 'RAMP' }],
      assets: [
        { external_key: 'AT-OLD-GATE', tags: ['rfid:K1'] },
        { external_key: 'AT-NEW-GATE', tags: ['rfid:K2'] },
      ],
    },
  );
  const base = Date.now() - 60_000;
  await scan('GATE', 'rfid:K1', new Date(base));
  await eventually(async () => (await locationOf(trackd, token, ids.assets['AT-OLD-GATE']!)) === 'GATE', 10_000);

  const report = trackd
    .request('GET', '/api/v1/reports/asset-locations?location_external_key=GATE&location_external_key=RAMP', { token })
    .then((res) => ({ res, at: Date.now() }));
  // While the thread holds the keys it resolved, GATE becomes another location's key and an asset arrives there.
  await new Promise((resolve) => setTimeout(resolve, 200));
  const renamed = await trackd.request('POST', `/api/v1/locations/${ids.locations.GATE}/rename`, {
    token,
    body: { external_key: 'GATE-OLD' },
  });
  t.equal(renamed.status, 200, renamed.text);
  const created = await trackd.request('POST', '/api/v1/locations', { token, body: { external_key: 'GATE', name: 'New gate' } });
  t.equal(created.status, 201, created.text);
  await scan('GATE', 'rfid:K2', new Date(base + 1000));
  await eventually(async () => (await locationOf(trackd, token, ids.assets['AT-NEW-GATE']!)) === 'GATE', DELAY_MS);
  const movedAt = Date.now();
  const { res, at } = await report;

  t.equal(res.status, 200, res.text);
  t.ok(movedAt < at, 'the new GATE and its asset were committed before the report read its rows');
  t.same(
    res.json.data.map((r: { asset_external_key: string; location_external_key: string }) => [
      r.asset_external_key,
      r.location_external_key,
    ]),
    [['AT-NEW-GATE', 'GATE']],
    'the page holds the asset at the location that has the key now, and not the one at the renamed location',
  );
  t.equal(res.json.total_count, 1, 'and counts it alone');
});

t.test('a location with a not-deleted asset placed at it is not deleted, whatever the asset validity', async (t) => {
  const { trackd, token, ids, scan } = await setUp(
    t,
    'Location Delete Rule',
    {},
    {
      locations: [{ external_key: 'LIVE' }, { external_key: 'LATER' }, { external_key: 'EXPIRED' }, { external_key: 'EMPTY' }],
      assets: [
        { external_key: 'AT-LIVE', tags: ['rfid:D1'] },
        { external_key: 'AT-LATER', tags: ['rfid:D2'] },
        { external_key: 'AT-EXPIRED', tags: ['rfid:D3'] },
      ],
    },
  );
  const base = Date.now() - 60_000;
  await scan('LIVE', 'rfid:D1', new Date(base));
  await scan('LATER', 'rfid:D2', new Date(base));
  await scan('EXPIRED', 'rfid:D3', new Date(base));
  await eventually(async () => (await locationOf(trackd, token, ids.assets['AT-EXPIRED']!)) === 'EXPIRED', 10_000);

  const patch = (id: number, body: unknown) =>
    trackd.request('PATCH', `/api/v1/assets/${id}`, { token, body, contentType: 'application/merge-patch+json' });
  const later = await patch(ids.assets['AT-LATER']!, { valid_from: new Date(Date.now() + 3_600_000).toISOString() });
  t.equal(later.status, 200, later.text);
  const expiring = await patch(ids.assets['AT-EXPIRED']!, { valid_to: new Date(Date.now() + 300).toISOString() });
  t.equal(expiring.status, 200, expiring.text);
  await new Promise((resolve) => setTimeout(resolve, 600));
  // Neither is in the report now (outside its validity window), so the report index does not hold them.
  const report = await trackd.request('GET', '/api/v1/reports/asset-locations?limit=50', { token });
  t.same(
    report.json.data.map((r: { asset_external_key: string }) => r.asset_external_key),
    ['AT-LIVE'],
    'only the asset within its validity window is reported',
  );

  const remove = (key: string) => trackd.request('DELETE', `/api/v1/locations/${ids.locations[key]}`, { token });
  for (const key of ['LIVE', 'LATER', 'EXPIRED']) {
    const res = await remove(key);
    t.equal(res.status, 409, `${key}: ${res.text}`);
    t.equal(res.json?.error?.type, 'conflict', `${key}: conflict`);
  }
  t.equal((await remove('EMPTY')).status, 204, 'an empty location is deleted');
  for (const key of ['AT-LATER', 'AT-EXPIRED']) {
    const res = await trackd.request('DELETE', `/api/v1/assets/${ids.assets[key]}`, { token });
    t.equal(res.status, 204, `asset ${key} deleted: ${res.text}`);
  }
  t.equal((await remove('LATER')).status, 204, 'its asset deleted, LATER is deleted');
  t.equal((await remove('EXPIRED')).status, 204, 'its asset deleted, EXPIRED is deleted');
});
