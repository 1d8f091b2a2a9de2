import type Database from 'better-sqlite3';
import t, { type Test } from 'tap';
import { type AssetsClient, assetsClient, scanFixture } from '../helpers/assets.js';
import { rng } from '../helpers/random.js';
import { drained, natsClient, publish, publishAll, restartAndKillMidDrain, scanBody } from '../helpers/scans.js';
import { iso, markFaults, shardDb, sqlVisits, type Visit, visitOf } from '../helpers/shardTruth.js';
import { MARK_SPACING } from '../../src/scans/historyMarks.js';
import { spawnTrackd, startNats, startTrackd, testClock } from '../helpers/trackd.js';

/**
 * What the writer keeps so that reads need not count or walk (issue 13) against the plain SQL
 * answer over the same shard file: an asset's history (visit_count for total_count, pages read
 * from the nearer end or through the rank marks, which must be exact) after random programs of
 * scans (moves, re-reads within the gap, late scans), restarts, and kill -9 in the middle of a
 * backlog; the lists' total_count without q or keys
 * (master_live_counts less the rows outside their validity window) after random creates, patches
 * of is_active and validity, deletes, clock moves past boundaries, and restarts.
 */

/** Every page of an asset's history through the API, with the total_count each page gave. */
async function apiVisits(api: AssetsClient, assetId: number, limit: number, query: string): Promise<{ totals: number[]; visits: Visit[] }> {
  const totals: number[] = [];
  const visits: Visit[] = [];
  for (let offset = 0; ; offset += limit) {
    const res = await api.req('GET', `/api/v1/assets/${assetId}/history?limit=${limit}&offset=${offset}${query}`);
    if (res.status !== 200) throw new Error(`history ${assetId} ${query}: ${res.status} ${res.text}`);
    totals.push(res.json.total_count);
    for (const v of res.json.data as Visit[]) visits.push(visitOf(v));
    if (offset + limit >= res.json.total_count) break;
  }
  return { totals, visits };
}

/** Compares every history view of the assets with SQLite; returns the number of mismatches. */
async function compareHistories(
  t: Test,
  api: AssetsClient,
  db: Database.Database,
  assetIds: number[],
  window: [number, number],
  step: string,
) {
  let mismatches = 0;
  for (const assetId of assetIds) {
    const views: [string, string, Visit[]][] = [
      ['default', '', sqlVisits(db, assetId, true)],
      ['ascending', '&sort=event_observed_at', sqlVisits(db, assetId, false)],
      [
        'window',
        `&from=${encodeURIComponent(iso(window[0]))}&to=${encodeURIComponent(iso(window[1]))}`,
        sqlVisits(db, assetId, true, window[0], window[1]),
      ],
      // Windows open on one side: most visits inside (counted from outside) or few (counted within).
      ['since', `&from=${encodeURIComponent(iso(window[0]))}`, sqlVisits(db, assetId, true, window[0])],
      ['until', `&to=${encodeURIComponent(iso(window[1]))}&sort=event_observed_at`, sqlVisits(db, assetId, false, undefined, window[1])],
    ];
    for (const [name, query, want] of views) {
      for (const limit of name === 'default' || name === 'ascending' ? [4, 50] : [50]) {
        const got = await apiVisits(api, assetId, limit, query);
        if (got.totals.some((n) => n !== want.length) || JSON.stringify(got.visits) !== JSON.stringify(want)) {
          mismatches++;
          t.fail(`${step}: asset ${assetId} ${name} limit ${limit}`, { got, want: { total: want.length, visits: want } });
        }
      }
    }
  }
  return mismatches;
}

t.test('history pages and counts equal the plain SQL answer after every step', async (t) => {
  const random = rng(1301);
  const trackd = await startTrackd(t, { env: { SHARDS: '1', HISTORY_GAP_SECONDS: '60' } });
  const api = await assetsClient(trackd, 'Kept Counts');
  const nc = await natsClient(t, trackd.natsUrl);
  const db = shardDb(t, trackd.dataDir);
  const { locations, assets } = await scanFixture(api, 'KC', { locations: 3, assets: 5 });
  const base = Date.now() - 86_400_000;
  let mismatches = 0;
  for (let step = 0; step < 20 && mismatches === 0; step++) {
    let did = 'restart';
    if (random() < 0.9) {
      // Bursts of scans 0-150 s apart (re-reads within the 60 s gap, moves past it), some late.
      const scans = 1 + Math.floor(random() * 6);
      for (let s = 0; s < scans; s++) {
        const chosen = assets.filter(() => random() < 0.5);
        if (chosen.length === 0) continue;
        const at = base + Math.floor(random() * 40) * 150_000 + Math.floor(random() * 150_000);
        await publish(
          nc,
          `scans.${api.orgId}.fixed`,
          scanBody(
            locations[Math.floor(random() * locations.length)]!,
            chosen.map((a) => `rfid:${a.tag}`),
            new Date(at),
          ),
        );
      }
      await drained(nc);
      did = `${scans} scans`;
    } else await trackd.restart();
    const from = base + Math.floor(random() * 20) * 150_000;
    mismatches += await compareHistories(
      t,
      api,
      db,
      assets.map((a) => a.id),
      [from, from + 2_000_000],
      `step ${step} (${did})`,
    );
  }
  const visits = db.prepare('SELECT count(*) FROM scan_history').pluck().get() as number;
  t.ok(visits > 40, `the program made a history to page (${visits} visits)`);
  t.equal(mismatches, 0, 'every history view equal to SQLite after each step');
});

t.test('kill -9 while a backlog drains: every count kept equals the rows counted after the restart', async (t) => {
  const random = rng(77);
  const nats = await startNats(t);
  const trackd = await spawnTrackd(t, { natsUrl: nats.url, env: { SHARDS: '1', HISTORY_GAP_SECONDS: '60' } });
  const api = await assetsClient(trackd, 'Kept Counts Kill');
  const nc = await natsClient(t, nats.url);
  const { locations, assets } = await scanFixture(api, 'KK', { locations: 4, assets: 30 });
  await trackd.stop('SIGTERM');
  // Enough that the kill, polled every 5 ms (every 50 ms when this was sized) once 800 are acked, lands before the end of the drain (3,000 drained between two 50 ms polls once).
  const SCANS = 12_000;
  const base = Date.now() - 86_400_000;
  const bodies = Array.from({ length: SCANS }, (_, i) => {
    // Mostly forward in time (re-reads and moves), one in ten late.
    const at = base + (random() < 0.1 ? Math.floor(random() * i) : i) * 20_000;
    const chosen = assets.filter(() => random() < 0.2);
    return scanBody(
      locations[Math.floor(random() * locations.length)]!,
      (chosen.length > 0 ? chosen : [assets[0]!]).map((a) => `rfid:${a.tag}`),
      new Date(at),
    );
  });
  await publishAll(nc, `scans.${api.orgId}.fixed`, bodies);
  const killedAt = await restartAndKillMidDrain(trackd, nc, 800);
  t.ok(killedAt < SCANS, `killed mid-drain (ack floor ${killedAt} of ${SCANS})`);
  await trackd.restart();
  await drained(nc);
  const db = shardDb(t, trackd.dataDir);
  const kept = db
    .prepare(
      'SELECT p.asset_id, p.visit_count, (SELECT count(*) FROM scan_history h WHERE h.asset_id = p.asset_id) AS counted FROM scan_positions p',
    )
    .all() as { asset_id: number; visit_count: number; counted: number }[];
  t.equal(kept.length, assets.length, 'every asset has a position');
  t.same(
    kept.filter((k) => k.visit_count !== k.counted),
    [],
    'visit_count equals the rows of scan_history for every asset',
  );
  // Each asset has about 1,800 visits, one in ten inserted late: the rank marks at their default spacing.
  t.ok((db.prepare('SELECT count(*) FROM scan_history_marks').pluck().get() as number) > assets.length, 'long histories are marked');
  t.same(markFaults(db, MARK_SPACING), [], 'every history rank mark exact, every gap within twice the spacing');
  const deep = assets[1]!.id;
  t.equal(
    await compareHistories(t, api, db, [deep], [base, base + SCANS * 10_000], 'after kill -9'),
    0,
    'an asset with many visits pages like SQLite',
  );
});

t.test('list total_count from the kept counts equals counting the rows, after every step', async (t) => {
  const random = rng(4711);
  const clock = testClock();
  const trackd = await startTrackd(t, { clock, env: { SHARDS: '1' } });
  const api = await assetsClient(trackd, 'Kept List Counts');
  await api.otherOrg('Kept List Counts Other').then((other) => other.create({ name: 'elsewhere' }));
  const db = shardDb(t, trackd.dataDir);
  const tables = { assets: '/api/v1/assets', locations: '/api/v1/locations' } as const;
  const rows: { table: keyof typeof tables; id: number; deleted: boolean }[] = [];
  const boundaries: number[] = [];
  /** A validity window around now: effective, starting soon, or ending soon. */
  const window = () => {
    const now = clock.now();
    const roll = random();
    if (roll < 0.4) return {};
    const at = now + 200 + Math.floor(random() * 5000);
    boundaries.push(at);
    return roll < 0.7 ? { valid_from: new Date(at).toISOString(), valid_to: null } : { valid_to: new Date(at).toISOString() };
  };
  /** Moves the clock past any boundary close to now, so that the request and the SQL see one state. */
  const quietClock = () => {
    for (;;) {
      const now = clock.now();
      const near = boundaries.find((b) => b >= now - 5 && b <= now + 1500);
      if (near === undefined) return;
      clock.advance(near - now + 10);
    }
  };
  let mismatches = 0;
  const check = async (step: string) => {
    quietClock();
    for (const [table, path] of Object.entries(tables)) {
      for (const [query, active] of [
        ['', undefined],
        ['&is_active=true', 1],
        ['&is_active=false', 0],
      ] as const) {
        const res = await api.req('GET', `${path}?limit=1${query}`);
        const now = clock.now();
        const want = db
          .prepare(
            `SELECT count(*) FROM ${table} WHERE org_id = ? AND deleted_at IS NULL AND valid_from <= ? AND (valid_to IS NULL OR valid_to > ?)
             AND (? IS NULL OR is_active = ?)`,
          )
          .pluck()
          .get(api.orgId, now, now, active ?? null, active ?? null) as number;
        if (res.json.total_count !== want) {
          mismatches++;
          t.fail(`${step}: ${table}${query}`, { got: res.json.total_count, want });
        }
      }
    }
  };
  for (let step = 0; step < 60 && mismatches === 0; step++) {
    const roll = random();
    const table = random() < 0.7 ? 'assets' : 'locations';
    const live = rows.filter((r) => !r.deleted && r.table === table);
    let did: string;
    if (roll < 0.45 || live.length === 0) {
      const body = { name: `n${step}`, is_active: random() < 0.7, ...window() };
      const res = await api.req('POST', tables[table], body);
      t.equal(res.status, 201, `create ${table} ${JSON.stringify(body)}: ${res.text}`);
      rows.push({ table, id: res.json.data.id, deleted: false });
      did = `create ${table} ${JSON.stringify(body)}`;
    } else if (roll < 0.65) {
      const row = live[Math.floor(random() * live.length)]!;
      const body: Record<string, unknown> = random() < 0.5 ? { is_active: random() < 0.5 } : window();
      const res = await api.req('PATCH', `${tables[table]}/${row.id}`, body, { contentType: 'application/merge-patch+json' });
      // A valid_to before the row's own future valid_from is refused (and changes nothing).
      if (!(res.status === 400 && 'valid_to' in body))
        t.equal(res.status, 200, `patch ${table} ${row.id} ${JSON.stringify(body)}: ${res.text}`);
      did = `patch ${table} ${row.id} ${JSON.stringify(body)}`;
    } else if (roll < 0.72) {
      const row = live[Math.floor(random() * live.length)]!;
      const res = await api.req('DELETE', `${tables[table]}/${row.id}`);
      t.equal(res.status, 204, `delete ${table} ${row.id}: ${res.text}`);
      row.deleted = true;
      did = `delete ${table} ${row.id}`;
    } else if (roll < 0.95) {
      const ms = Math.floor(random() * 3000);
      clock.advance(ms);
      did = `clock +${ms} ms`;
    } else {
      await trackd.restart();
      did = 'restart';
    }
    await check(`step ${step} (${did})`);
  }
  t.ok(rows.filter((r) => r.table === 'assets' && !r.deleted).length > 3, 'the program left assets to count');
  t.equal(mismatches, 0, 'every kept count equal to counting the rows after each step');
});
