import { performance } from 'node:perf_hooks';
import { jetstreamManager } from '@nats-io/jetstream';
import t from 'tap';
import { seed } from './helpers/masterdata.js';
import { corpusReads, CS463_CORPUS, expectedVisits, metricSum, type ExpectedVisit } from './helpers/readers.js';
import { natsClient } from './helpers/scans.js';
import { eventually, startTrackd, type Trackd } from './helpers/trackd.js';

const GAP_MS = 300_000;
const READERS = 'stream="READERS"';
// Three capture points are location external_keys; the fourth is a tag on a location with another key.
const LOCATION_BY_CAPTURE_POINT: Record<string, string> = {
  'cs463-212-1': 'cs463-212-1',
  'cs463-212-2': 'cs463-212-2',
  'cs463-214-1': 'cs463-214-1',
  'cs463-214-2': 'DOCK-DOOR-7',
};

const corpus = corpusReads();
const epcs = [...new Set(corpus.reads.map((r) => r.epc))].sort();
const assetKey = (epc: string) => `EPC-${epc}`;

/** What the file implies for each EPC: where and when it was last seen, and its visits. */
function expectations() {
  const byEpc = new Map<string, { at: number; location: string }[]>();
  for (const r of corpus.reads) {
    const list = byEpc.get(r.epc) ?? [];
    list.push({ at: r.at, location: LOCATION_BY_CAPTURE_POINT[r.capturePoint] });
    byEpc.set(r.epc, list);
  }
  const out = new Map<string, { location: string; lastSeen: number; visits: ExpectedVisit[] }>();
  for (const [epc, reads] of byEpc) {
    const latest = reads.reduce((a, b) => (b.at > a.at ? b : a));
    const tied = reads.filter((r) => r.at === latest.at && r.location !== latest.location);
    if (tied.length > 0) throw new Error(`corpus: ${epc} has two locations at its latest instant`);
    out.set(epc, { location: latest.location, lastSeen: latest.at, visits: expectedVisits(reads, GAP_MS) });
  }
  return out;
}

async function allPages(trackd: Trackd, token: string, url: string): Promise<any[]> {
  const rows: any[] = [];
  for (let offset = 0; ; offset += 200) {
    const res = await trackd.request('GET', `${url}${url.includes('?') ? '&' : '?'}limit=200&offset=${offset}`, { token });
    if (res.status !== 200) throw new Error(`GET ${url} ${res.status}: ${res.text}`);
    rows.push(...res.json.data);
    if (rows.length >= res.json.total_count || res.json.data.length === 0) return rows;
  }
}

/** The report and every asset's history, as comparable plain data. */
async function snapshot(trackd: Trackd, token: string, assetIds: Record<string, number>) {
  const report = await allPages(trackd, token, '/api/v1/reports/asset-locations?sort=asset_external_key');
  const history: Record<string, any[]> = {};
  for (const epc of epcs) history[epc] = await allPages(trackd, token, `/api/v1/assets/${assetIds[assetKey(epc)]}/history?sort=event_observed_at`);
  return { report, history };
}

t.test('the CS463 capture replayed over MQTT into the embedded nats-server gives the locations and visits the file implies; a second replay changes nothing', async (t) => {
  t.equal(corpus.messages, 2521);
  t.equal(epcs.length, 71);
  const trackd = await startTrackd(t, { natsUrl: 'embedded' });
  const org = trackd.createOrg('Reader Org');
  const admin = trackd.createKey(org.id).token;
  const token = trackd.createKey(org.id, ['tracking:read']).token;
  const seeded = await seed(trackd, admin, {
    locations: Object.entries(LOCATION_BY_CAPTURE_POINT).map(([capturePoint, key]) => ({ external_key: key, tags: key === capturePoint ? [] : [`barcode:${capturePoint}`] })),
    assets: epcs.map((epc) => ({ external_key: assetKey(epc), tags: [`rfid:${epc}`] })),
  });
  const locationKeyById = new Map(Object.entries(seeded.locations).map(([key, id]) => [id, key]));

  const started = performance.now();
  const summary = trackd.cli(['readers', 'replay', CS463_CORPUS, '--org', String(org.id)]);
  t.match(summary, { messages: 2521, reads: corpus.reads.length, seconds: Number, rate: Number });
  await eventually(async () => (await metricSum(trackd, 'trackd_scans_applied_total', READERS)) === 2521, 30_000, 20);
  const allApplied = Date.now();
  const seconds = (performance.now() - started) / 1000;
  const jsm = await jetstreamManager(await natsClient(t, trackd.natsUrl));
  const firstStored = Date.parse((await jsm.streams.getMessage('READERS', { seq: 1 }))!.timestamp);
  const fromFirst = (allApplied - firstStored) / 1000;
  t.comment(
    `replay: first message stored in READERS until all applied ${fromFirst.toFixed(2)} s = ${Math.round(2521 / fromFirst)} messages/s, ${Math.round(corpus.reads.length / fromFirst)} reads/s; ` +
      `CLI start until all applied ${seconds.toFixed(2)} s; the CLI's own figure ${summary.seconds} s (${summary.rate} messages/s)`,
  );
  t.equal(await metricSum(trackd, 'trackd_scan_reads_applied_total', READERS), corpus.reads.length, 'every read resolved to an asset');
  t.equal(await metricSum(trackd, 'trackd_scans_dead_lettered_total', READERS), 0);
  t.equal(await metricSum(trackd, 'trackd_scans_applied_total', 'reader="cs463-212"'), 1804, 'metrics per reader');
  t.equal(await metricSum(trackd, 'trackd_scans_applied_total', 'reader="cs463-214"'), 717);

  const expected = expectations();
  const first = await snapshot(trackd, token, seeded.assets);
  t.equal(first.report.length, 71);
  const reportMismatches: string[] = [];
  const historyMismatches: string[] = [];
  let visits = 0;
  for (const epc of epcs) {
    const want = expected.get(epc)!;
    const row = first.report.find((r) => r.asset_external_key === assetKey(epc));
    const got = row === undefined ? undefined : { location: row.location_external_key, lastSeen: row.asset_last_seen };
    const wanted = { location: want.location, lastSeen: new Date(want.lastSeen).toISOString() };
    if (JSON.stringify(got) !== JSON.stringify(wanted)) reportMismatches.push(`${epc}: got ${JSON.stringify(got)}, want ${JSON.stringify(wanted)}`);
    const history = first.history[epc].map((h) => ({
      location: locationKeyById.get(h.location_id),
      start: Date.parse(h.event_observed_at),
      last: Date.parse(h.last_seen_at),
      count: h.read_count,
    }));
    visits += want.visits.length;
    if (JSON.stringify(history) !== JSON.stringify(want.visits)) historyMismatches.push(`${epc}: ${history.length} visits, want ${want.visits.length}`);
  }
  t.same(reportMismatches, [], 'per EPC: location and asset_last_seen are those of its latest read');
  t.same(historyMismatches, [], `per EPC: the history holds the visits the file implies (${visits} in all)`);

  const again = trackd.cli(['readers', 'replay', CS463_CORPUS, '--org', String(org.id)]);
  t.equal(again.messages, 2521);
  await eventually(async () => (await metricSum(trackd, 'trackd_scans_duplicate_total', READERS)) === 2521, 30_000, 20);
  t.equal(await metricSum(trackd, 'trackd_scans_applied_total', READERS), 2521, 'the second replay applied nothing');
  t.same(await snapshot(trackd, token, seeded.assets), first, 'report and history are unchanged');
});
