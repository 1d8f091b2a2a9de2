import t from 'tap';
import { ulid } from 'ulid';
import { eventually, startTrackd } from '../helpers/trackd.js';
import { seed, type SeedSpec, type Seeded } from '../helpers/masterdata.js';
import { deadLetters, metric, natsClient, publish, scanBody } from '../helpers/scans.js';

const SPEC: SeedSpec = {
  locations: [{ external_key: 'DOCK-1' }, { external_key: 'DOCK-2', tags: ['rfid:LOC-TAG-2'] }, { external_key: 'YARD' }],
  assets: [
    { external_key: 'CLI-1', tags: ['rfid:C1'] },
    { external_key: 'DUP-1', tags: ['rfid:D1'] },
    { external_key: 'DUP-2', tags: ['rfid:D2'] },
    { external_key: 'VIS-1', tags: ['rfid:V1', 'ble:V1B'] },
    { external_key: 'ORD-1', tags: ['rfid:O1'] },
    { external_key: 'DEAD-1', tags: ['rfid:X1'] },
    { external_key: 'TAGGED-LATER' },
  ],
};

// One trackd and org for the file (tests use their own assets); metrics are compared as deltas.
const trackd = await startTrackd(t);
const org = await trackd.createOrg('Scans Org');
const token = (await trackd.createKey(org.id, ['tracking:read'])).token;
const admin = (await trackd.createKey(org.id)).token;
const ids: Seeded = await seed(trackd, admin, SPEC);
const nc = await natsClient(t, trackd.natsUrl);
const subject = `scans.${org.id}.fixed`;

async function applied(): Promise<number> {
  return metric(trackd, 'trackd_scans_applied_total');
}

async function untilApplied(target: number): Promise<void> {
  await eventually(async () => (await applied()) >= target);
}

const at = (base: number, seconds: number) => new Date(base + seconds * 1000);

async function history(assetId: number, query = '') {
  const res = await trackd.request('GET', `/api/v1/assets/${assetId}/history?sort=event_observed_at${query}`, { token });
  if (res.status !== 200) throw new Error(`history ${res.status}: ${res.text}`);
  return res.json as { data: any[]; total_count: number };
}

async function reportRow(assetId: number) {
  const res = await trackd.request('GET', `/api/v1/reports/asset-locations?asset_id=${assetId}`, { token });
  return res.json.data[0];
}

t.test('a scan published with the CLI becomes the current location; unknown tags and location tags are skipped and counted', async (t) => {
  const before = {
    applied: await applied(),
    unknown: await metric(trackd, 'trackd_scan_reads_skipped_total', 'reason="unknown_tag"'),
    onLocation: await metric(trackd, 'trackd_scan_reads_skipped_total', 'reason="location_tag"'),
  };
  const published = await trackd.cli([
    'scans',
    'publish',
    '--org',
    String(org.id),
    '--location',
    'DOCK-1',
    '--tag',
    'rfid:C1',
    '--tag',
    'rfid:NOPE',
    '--tag',
    'rfid:LOC-TAG-2',
  ]);
  t.match(published, { event_id: /^[0-9A-Z]{26}$/, stream: 'SCANS', seq: Number });
  const row = await eventually(async () => (await reportRow(ids.assets['CLI-1']!)) ?? false);
  t.same(Object.keys(row).sort(), [
    'asset_deleted_at',
    'asset_external_key',
    'asset_id',
    'asset_last_seen',
    'location_external_key',
    'location_id',
  ]);
  t.match(row, {
    asset_id: ids.assets['CLI-1'],
    asset_external_key: 'CLI-1',
    location_id: ids.locations['DOCK-1'],
    location_external_key: 'DOCK-1',
    asset_deleted_at: null,
  });
  t.match(row.asset_last_seen, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  t.equal(await applied(), before.applied + 1);
  t.equal(await metric(trackd, 'trackd_scan_reads_skipped_total', 'reason="unknown_tag"'), before.unknown + 1);
  t.equal(await metric(trackd, 'trackd_scan_reads_skipped_total', 'reason="location_tag"'), before.onLocation + 1);
  const h = await history(ids.assets['CLI-1']!);
  t.equal(h.total_count, 1);
  t.match(h.data[0], { location_id: ids.locations['DOCK-1'], read_count: 1, location: { external_key: 'DOCK-1', tags: [] } });
});

t.test('de-duplication by Nats-Msg-Id and by event_id; location by id and by location tag', async (t) => {
  const before = { applied: await applied(), duplicate: await metric(trackd, 'trackd_scans_duplicate_total') };
  const base = Date.now() - 60_000;
  const first = scanBody('DOCK-1', ['rfid:D1'], at(base, 0));
  const a = await publish(nc, subject, first);
  const again = await publish(nc, subject, first);
  t.equal(again.duplicate, true, 'JetStream drops the same Nats-Msg-Id within the duplicate window');
  t.equal(again.seq, a.seq);
  // Re-published with a new Nats-Msg-Id (a new stream seq) but the same event_id: no effect.
  await publish(nc, `scans.${org.id}.handheld`, { ...first, observed_at: at(base, 10).toISOString() }, ulid());
  await publish(nc, subject, scanBody('x', ['rfid:D1'], at(base, 20), { location: { id: ids.locations['DOCK-1'] } }));
  await publish(nc, subject, scanBody('x', ['rfid:D2'], at(base, 20), { location: { tag_type: 'rfid', value: 'LOC-TAG-2' } }));
  await untilApplied(before.applied + 3);
  await eventually(async () => (await metric(trackd, 'trackd_scans_duplicate_total')) === before.duplicate + 1);
  const h = await history(ids.assets['DUP-1']!);
  t.equal(h.total_count, 1);
  t.equal(h.data[0].read_count, 2, 'the original and the by-id scan; the re-published event changed nothing');
  t.equal(h.data[0].last_seen_at, at(base, 20).toISOString());
  t.equal((await reportRow(ids.assets['DUP-2']!)).location_external_key, 'DOCK-2');
});

t.test('visits: re-reads extend, moves and gaps start events, late scans are placed by observed_at', async (t) => {
  const asset = ids.assets['VIS-1']!;
  const base = Date.now() - 3_600_000;
  const start = await applied();
  const send = (loc: string, s: number, tag = 'rfid:V1') => publish(nc, subject, scanBody(loc, [tag], at(base, s)));
  await send('DOCK-1', 0);
  await send('DOCK-1', 60);
  await send('DOCK-1', 100, 'ble:V1B'); // another tag of the same asset
  await send('DOCK-2', 200); // move
  await send('DOCK-2', 900); // same place, 700 s > HISTORY_GAP_SECONDS (300): new event
  await send('DOCK-2', 1000);
  await untilApplied(start + 6);
  let h = await history(asset);
  t.same(
    h.data.map((e) => [e.location.external_key, e.event_observed_at, e.last_seen_at, e.read_count]),
    [
      ['DOCK-1', at(base, 0).toISOString(), at(base, 100).toISOString(), 3],
      ['DOCK-2', at(base, 200).toISOString(), at(base, 200).toISOString(), 1],
      ['DOCK-2', at(base, 900).toISOString(), at(base, 1000).toISOString(), 2],
    ],
  );
  // Late scans: inside the first visit (extends it), elsewhere (its own event), and at the current
  // place within the gap after an earlier visit there (extends that one). None moves the current location.
  await send('DOCK-1', 30);
  await send('YARD', 500);
  await send('DOCK-2', 400);
  await untilApplied(start + 9);
  h = await history(asset);
  t.same(
    h.data.map((e) => [e.location.external_key, e.event_observed_at, e.last_seen_at, e.read_count]),
    [
      ['DOCK-1', at(base, 0).toISOString(), at(base, 100).toISOString(), 4],
      ['DOCK-2', at(base, 200).toISOString(), at(base, 400).toISOString(), 2],
      ['YARD', at(base, 500).toISOString(), at(base, 500).toISOString(), 1],
      ['DOCK-2', at(base, 900).toISOString(), at(base, 1000).toISOString(), 2],
    ],
  );
  const row = await reportRow(asset);
  t.equal(row.location_external_key, 'DOCK-2');
  t.equal(row.asset_last_seen, at(base, 1000).toISOString());
  const newest = await trackd.request('GET', `/api/v1/assets/${asset}/history`, { token });
  t.equal(newest.json.data[0].event_observed_at, at(base, 900).toISOString(), 'the default sort is newest first');
});

t.test('out of order: the greatest observed_at wins the current location; ties go to the later arrival', async (t) => {
  const asset = ids.assets['ORD-1']!;
  const base = Date.now() - 600_000;
  const start = await applied();
  await publish(nc, subject, scanBody('YARD', ['rfid:O1'], at(base, 100)));
  await publish(nc, subject, scanBody('DOCK-1', ['rfid:O1'], at(base, 50)));
  await untilApplied(start + 2);
  let row = await reportRow(asset);
  t.match(row, { location_external_key: 'YARD', asset_last_seen: at(base, 100).toISOString() });
  t.equal((await history(asset)).total_count, 2);
  await publish(nc, subject, scanBody('DOCK-2', ['rfid:O1'], at(base, 100)));
  await untilApplied(start + 3);
  row = await reportRow(asset);
  t.match(row, { location_external_key: 'DOCK-2', asset_last_seen: at(base, 100).toISOString() });
});

t.test('messages that can never apply are acked and dead-lettered with their reason; later good ones still apply', async (t) => {
  const now = Date.now();
  const deadBefore = (await deadLetters(nc)).length;
  const unknownLocationBefore = await metric(trackd, 'trackd_scans_dead_lettered_total', 'reason="unknown_location"');
  await publish(nc, subject, '{"event_id": "x", ', 'bad-json');
  await publish(nc, subject, { event_id: 'no-reads', observed_at: new Date(now).toISOString(), location: { external_key: 'DOCK-1' } });
  await publish(nc, subject, scanBody('DOCK-1', ['rfid:X1'], '1970-01-01T00:00:00Z'));
  await publish(nc, subject, scanBody('DOCK-1', ['rfid:X1'], new Date(now + 3_600_000)));
  await publish(nc, subject, scanBody('NOWHERE', ['rfid:X1'], new Date(now)));
  await publish(nc, 'scans.424242.fixed', scanBody('DOCK-1', ['rfid:X1'], new Date(now)));
  await publish(nc, `scans.${org.id}.drone`, scanBody('DOCK-1', ['rfid:X1'], new Date(now)));
  await publish(nc, subject, scanBody('YARD', ['rfid:X1'], new Date(now - 1000)));
  const row = await eventually(async () => {
    const r = await reportRow(ids.assets['DEAD-1']!);
    return r?.location_external_key === 'YARD' && r;
  });
  t.ok(row);
  const dead = await eventually(async () => {
    const d = await deadLetters(nc);
    return d.length === deadBefore + 7 && d.slice(deadBefore);
  });
  const byReason = Object.fromEntries(dead.map((d) => [d.reason, d]));
  t.same(Object.keys(byReason).sort(), [
    'future_observed_at',
    'invalid_body',
    'invalid_json',
    'invalid_observed_at',
    'invalid_subject',
    'unknown_location',
    'unknown_org',
  ]);
  t.equal(byReason.invalid_json.subject, `scans_dead.${org.id}`);
  t.equal(byReason.invalid_json.data, '{"event_id": "x", ', 'the original body, byte for byte');
  t.match(byReason.invalid_body.detail, /reads: required/);
  t.match(byReason.invalid_observed_at.detail, /sentinel/);
  t.match(byReason.unknown_location.detail, /NOWHERE/);
  t.equal(byReason.unknown_org.subject, 'scans_dead.424242');
  t.equal(await metric(trackd, 'trackd_scans_dead_lettered_total', 'reason="unknown_location"'), unknownLocationBefore + 1);
  t.equal(await metric(trackd, 'trackd_scans_in_hand'), 0, 'nothing is left unacked');
});

t.test('tag resolution follows master data: a tag attached after an unknown read resolves, a detached one no longer does', async (t) => {
  const asset = ids.assets['TAGGED-LATER']!;
  const skipped = () => metric(trackd, 'trackd_scan_reads_skipped_total', 'reason="unknown_tag"');
  const before = { applied: await applied(), skipped: await skipped() };
  const base = Date.now() - 60_000;
  await publish(nc, subject, scanBody('DOCK-1', ['rfid:LATE-1'], at(base, 0)));
  await untilApplied(before.applied + 1);
  t.equal(await skipped(), before.skipped + 1);
  const attached = await trackd.request('POST', `/api/v1/assets/${asset}/tags`, {
    token: admin,
    body: { tag_type: 'rfid', value: 'LATE-1' },
  });
  t.equal(attached.status, 201);
  await publish(nc, subject, scanBody('DOCK-2', ['rfid:LATE-1'], at(base, 10)));
  await untilApplied(before.applied + 2);
  t.equal((await reportRow(asset))?.location_external_key, 'DOCK-2');
  t.equal((await trackd.request('DELETE', `/api/v1/assets/${asset}/tags/${attached.json.data.id}`, { token: admin })).status, 204);
  await publish(nc, subject, scanBody('YARD', ['rfid:LATE-1'], at(base, 20)));
  await untilApplied(before.applied + 3);
  t.equal(await skipped(), before.skipped + 2);
  t.equal((await reportRow(asset)).location_external_key, 'DOCK-2', 'the detached tag no longer moves the asset');
});

t.test('HISTORY_GAP_SECONDS=0 records every scan as its own event', async (t) => {
  const raw = await startTrackd(t, { env: { HISTORY_GAP_SECONDS: '0', SHARDS: '1' } });
  const rawOrg = await raw.createOrg('Raw');
  const rawToken = (await raw.createKey(rawOrg.id)).token;
  const rawIds = await seed(raw, rawToken, {
    locations: [{ external_key: 'DOCK-1' }],
    assets: [{ external_key: 'RAW-1', tags: ['rfid:R1'] }],
  });
  const rawNc = await natsClient(t, raw.natsUrl);
  const base = Date.now() - 600_000;
  for (const s of [0, 1, 2, 1]) await publish(rawNc, `scans.${rawOrg.id}.fixed`, scanBody('DOCK-1', ['rfid:R1'], at(base, s)));
  await eventually(async () => (await metric(raw, 'trackd_scans_applied_total')) === 4);
  const res = await raw.request('GET', `/api/v1/assets/${rawIds.assets['RAW-1']}/history?sort=event_observed_at`, { token: rawToken });
  t.same(
    res.json.data.map((e: any) => [e.event_observed_at, e.read_count]),
    [
      [at(base, 0).toISOString(), 1],
      [at(base, 1).toISOString(), 1],
      [at(base, 1).toISOString(), 1],
      [at(base, 2).toISOString(), 1],
    ],
  );
});
