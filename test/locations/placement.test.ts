import t from 'tap';
import { startLocations } from '../helpers/locations.js';
import { metric, natsClient, publish, scanBody } from '../helpers/scans.js';
import { eventually } from '../helpers/trackd.js';

/** Delete rule 2 (interface 4.5): live assets placed at a location block its delete, after the descendant check. */
t.test('location delete and assets placed by scans', async (t) => {
  const api = await startLocations(t, 'Placement Org');
  const nc = await natsClient(t, api.trackd.natsUrl);
  let applied = 0;
  async function scan(locationKey: string, tag: string) {
    await publish(nc, `scans.${api.orgId}.fixed`, scanBody(locationKey, [tag], new Date()));
    applied++;
    await eventually(async () => (await metric(api.trackd, 'trackd_scans_applied_total')) >= applied);
  }
  async function asset(key: string, tag: string) {
    const res = await api.req('POST', '/api/v1/assets', { external_key: key, name: key, tags: [{ tag_type: 'rfid', value: tag }] });
    t.equal(res.status, 201, `asset ${key}`);
    return res.json.data;
  }

  const dock = await api.create({ external_key: 'DOCK', name: 'Dock' });
  const bay = await api.create({ external_key: 'BAY', name: 'Bay', parent_id: dock.id });
  const yard = await api.create({ external_key: 'YARD', name: 'Yard' });
  const forklift = await asset('FORKLIFT', 'T-FORK');
  const pallet = await asset('PALLET', 'T-PAL');
  await scan('DOCK', 'rfid:T-FORK');
  await scan('DOCK', 'rfid:T-PAL');

  const both = await api.req('DELETE', `/api/v1/locations/${dock.id}`);
  t.equal(both.status, 409);
  t.match(both.json.error.detail, /^location has descendant locations/, 'descendants are checked first');

  t.equal((await api.req('DELETE', `/api/v1/locations/${bay.id}`)).status, 204);
  const placed = await api.req('DELETE', `/api/v1/locations/${dock.id}`);
  t.equal(placed.status, 409);
  t.equal(placed.json.error.type, 'conflict');
  t.match(placed.json.error.detail, /^location has assets placed at it/);
  t.match(placed.json.error.detail, /cascade is not supported$/);

  await scan('YARD', 'rfid:T-FORK');
  t.equal((await api.req('DELETE', `/api/v1/locations/${dock.id}`)).status, 409, 'the pallet is still placed there');
  t.equal((await api.req('DELETE', `/api/v1/assets/${pallet.id}`)).status, 204);
  t.equal(
    (await api.req('DELETE', `/api/v1/locations/${dock.id}`)).status,
    204,
    'soft-deleted assets do not block; moved ones no longer count',
  );
  t.equal((await api.req('DELETE', `/api/v1/locations/${yard.id}`)).status, 409, 'the forklift now blocks the yard');
  t.equal(forklift.external_key, 'FORKLIFT');
});
