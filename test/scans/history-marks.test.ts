import type Database from 'better-sqlite3';
import t, { type Test } from 'tap';
import { type AssetsClient, assetsClient, scanFixture } from '../helpers/assets.js';
import { rng } from '../helpers/random.js';
import { drained, natsClient, publish, scanBody } from '../helpers/scans.js';
import { iso, markFaults, shardDb, sqlVisits, type Visit, visitOf } from '../helpers/shardTruth.js';
import { spawnTrackd, startNats } from '../helpers/trackd.js';

/**
 * History pages at any offset through the rank marks (issue 13; src/scans/historyMarks.ts), against
 * the plain SQL answer over the same shard file. The marks are spaced 3 apart here, so a page more
 * than 6 visits from either end of its window is read through a mark, and the late scans of the
 * random programs keep shifting the marks' ranks and splitting their gaps. (kept-counts.test.ts
 * checks the marks at their default spacing after a kill -9 in the middle of a backlog.)
 */
const SPACING = 3;
const ENV = { SHARDS: '1', HISTORY_GAP_SECONDS: '60', TRACKD_TEST_HISTORY_MARK_SPACING: String(SPACING) };

/** One page of an asset's history through the API. */
async function apiPage(api: AssetsClient, assetId: number, limit: number, offset: number, query: string) {
  const res = await api.req('GET', `/api/v1/assets/${assetId}/history?limit=${limit}&offset=${offset}${query}`);
  if (res.status !== 200) throw new Error(`history ${assetId} ${query}: ${res.status} ${res.text}`);
  return { total: res.json.total_count as number, visits: (res.json.data as Visit[]).map(visitOf) };
}

/** Every page at a small limit, and pages at random offsets and limits, of every view; returns the mismatches. */
async function comparePages(t: Test, api: AssetsClient, db: Database.Database, random: () => number, assetIds: number[], step: string) {
  let mismatches = 0;
  let pages = 0;
  for (const assetId of assetIds) {
    const times = sqlVisits(db, assetId, false).map((v) => Date.parse(v.event_observed_at));
    const at = (share: number) => times[Math.floor(share * (times.length - 1))] ?? 0;
    const from = at(random() * 0.4);
    const to = at(0.6 + random() * 0.4);
    const views: [string, string, Visit[]][] = [
      ['default', '', sqlVisits(db, assetId, true)],
      ['ascending', '&sort=event_observed_at', sqlVisits(db, assetId, false)],
      ['window', `&from=${encodeURIComponent(iso(from))}&to=${encodeURIComponent(iso(to))}`, sqlVisits(db, assetId, true, from, to)],
      ['since, ascending', `&from=${encodeURIComponent(iso(from))}&sort=event_observed_at`, sqlVisits(db, assetId, false, from)],
      ['until', `&to=${encodeURIComponent(iso(to))}`, sqlVisits(db, assetId, true, undefined, to)],
      ['time down, ties up', '&sort=-event_observed_at,event_observed_at', sqlVisits(db, assetId, true, undefined, undefined, false)],
    ];
    for (const [name, query, want] of views) {
      const requests: [number, number][] = [];
      const stride = Math.max(4, Math.ceil(want.length / 60));
      for (let offset = 0; offset < want.length + 3; offset += stride) requests.push([4, offset]);
      for (let i = 0; i < 6; i++) requests.push([1 + Math.floor(random() * 12), Math.floor(random() * (want.length + 2))]);
      for (const [limit, offset] of requests) {
        const got = await apiPage(api, assetId, limit, offset, query);
        const expected = want.slice(offset, offset + limit);
        pages++;
        if (got.total !== want.length || JSON.stringify(got.visits) !== JSON.stringify(expected)) {
          mismatches++;
          t.fail(`${step}: asset ${assetId} ${name} limit ${limit} offset ${offset}`, {
            got,
            want: { total: want.length, visits: expected },
          });
        }
      }
    }
  }
  return { mismatches, pages };
}

t.test('history pages at any offset equal the plain SQL answer while late scans shift the marks', async (t) => {
  const random = rng(2207);
  // A child process: the shard threads read the spacing from the environment they start with.
  const nats = await startNats(t);
  const trackd = await spawnTrackd(t, { natsUrl: nats.url, env: ENV });
  const api = await assetsClient(trackd, 'History Marks');
  const nc = await natsClient(t, nats.url);
  const db = shardDb(t, trackd.dataDir);
  const { locations, assets } = await scanFixture(api, 'HM', { locations: 3, assets: 3 });
  const base = Date.now() - 86_400_000;
  let clock = 0;
  let mismatches = 0;
  let pages = 0;
  let lateScans = 0;
  for (let step = 0; step < 10 && mismatches === 0; step++) {
    let did = 'restart';
    if (step === 0 || random() < 0.8) {
      // Moves 90 s apart (past the 60 s gap) at random places; one scan in four late, anywhere in the past.
      const bodies: ReturnType<typeof scanBody>[] = [];
      for (let s = 0; s < 25; s++) {
        const late = clock > 0 && random() < 0.25;
        const at = late ? base + Math.floor(random() * clock) * 90_000 + 45_000 : base + ++clock * 90_000;
        if (late) lateScans++;
        const chosen = assets.filter(() => random() < 0.7);
        bodies.push(
          scanBody(
            locations[Math.floor(random() * locations.length)]!,
            (chosen.length > 0 ? chosen : assets).map((a) => `rfid:${a.tag}`),
            new Date(at),
          ),
        );
      }
      for (const body of bodies) await publish(nc, `scans.${api.orgId}.fixed`, body);
      await drained(nc);
      did = 'scans';
    } else await trackd.restart();
    const faults = markFaults(db, SPACING);
    if (faults.length > 0) {
      mismatches++;
      t.fail(`step ${step} (${did}): the marks`, { faults });
    }
    const compared = await comparePages(
      t,
      api,
      db,
      random,
      assets.map((a) => a.id),
      `step ${step} (${did})`,
    );
    mismatches += compared.mismatches;
    pages += compared.pages;
  }
  const marks = db.prepare('SELECT count(*) FROM scan_history_marks').pluck().get() as number;
  const visits = db.prepare('SELECT max(visit_count) FROM scan_positions').pluck().get() as number;
  t.ok(visits > 8 * SPACING, `histories long enough to page through marks (${visits} visits)`);
  t.ok(marks > 10, `the writer kept marks (${marks})`);
  t.ok(lateScans > 20, `late scans inserted visits among the marks (${lateScans})`);
  t.equal(mismatches, 0, `every page equal to SQLite after each step (${pages} pages)`);
});
