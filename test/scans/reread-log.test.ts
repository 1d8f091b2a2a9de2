import type Database from 'better-sqlite3';
import t, { type Test } from 'tap';
import { type AssetsClient, assetsClient } from '../helpers/assets.js';
import { rng } from '../helpers/random.js';
import { drained, natsClient, publish, publishAll, restartAndKillMidDrain, scanBody } from '../helpers/scans.js';
import { iso, loggedEntries, POSITIONS, shardDb, sqlVisits, type Visit, visitOf } from '../helpers/shardTruth.js';
import { eventually, spawnTrackd, startNats, startTrackd, type Trackd } from '../helpers/trackd.js';

/**
 * Re-reads of parked tags go to a log (migration 017, src/scans/rereadLog.ts) and are folded into
 * scan_positions a slice per batch: every read of last_seen_at and the open visit's read count must
 * still give the answer of the plain SQL over the same file, scan_positions with the log's latest
 * row laid over it. After every step of a random program of scans (re-reads within the gap, moves,
 * late scans), restarts, and a kill -9 in the middle of a backlog: report pages through the rank
 * index (default order, ascending, per location, by asset key) and through SQLite's walk (two
 * locations, q), every asset's history, and the report export. A fold slice of 7 positions
 * (TRACKD_TEST_FOLD_SLICE) makes a fold cycle take several batches, so the log holds rows of
 * several batches and the cursor stops inside the table.
 */

const ENV = { SHARDS: '1', HISTORY_GAP_SECONDS: '3600' };
// Read by the scan consumer when it starts (in this process, and in a spawned trackd, which inherits it).
process.env.TRACKD_TEST_FOLD_SLICE = '7';
// The writer files its log entries' asset ids in buckets of this many consecutive ids: a few, so that the test's assets span many.
process.env.TRACKD_TEST_FOLD_BUCKET = '3';

interface ReportItem {
  asset_id: number;
  location_id: number;
  asset_last_seen: string;
}

const item = (r: { asset_id: number; location_id: number; last_seen_at: number }): ReportItem => ({
  asset_id: r.asset_id,
  location_id: r.location_id,
  asset_last_seen: iso(r.last_seen_at),
});

/** The live report of the org the plain way, in `order` (SQL), optionally at some locations. */
function sqlReport(db: Database.Database, orgId: number, order: string, locationIds?: number[], withDeleted = false): ReportItem[] {
  let where = locationIds === undefined ? '' : `AND p.location_id IN (${locationIds.join(', ')})`;
  if (!withDeleted) where += ' AND p.asset_deleted_at IS NULL';
  const rows = db
    .prepare(
      `SELECT p.asset_id, p.location_id, p.last_seen_at FROM ${POSITIONS} p JOIN assets a ON a.id = p.asset_id
       WHERE p.org_id = ? ${where} ORDER BY ${order}`,
    )
    .all(orgId) as { asset_id: number; location_id: number; last_seen_at: number }[];
  return rows.map(item);
}

/** Every page of one report view, with the total_count each page gave. */
async function apiReport(api: AssetsClient, limit: number, query: string): Promise<{ items: ReportItem[]; totals: number[] }> {
  const items: ReportItem[] = [];
  const totals: number[] = [];
  for (let offset = 0; ; offset += limit) {
    const res = await api.req('GET', `/api/v1/reports/asset-locations?limit=${limit}&offset=${offset}${query}`);
    if (res.status !== 200) throw new Error(`report ${query}: ${res.status} ${res.text}`);
    items.push(...(res.json.data as ReportItem[]).map(item2));
    totals.push(res.json.total_count);
    if (offset + limit >= res.json.total_count) break;
  }
  return { items, totals };
}

const item2 = (r: ReportItem): ReportItem => ({ asset_id: r.asset_id, location_id: r.location_id, asset_last_seen: r.asset_last_seen });

/**
 * Every view of the report, every asset's history and the export against the plain SQL; and the
 * reads the history counts against `reads`, the reads published (each scan names an asset once, so
 * each read counts once in exactly one visit): a figure the log lost or laid over twice changes it
 * on both sides. Returns the mismatches.
 */
async function compareAll(
  t: Test,
  api: AssetsClient,
  db: Database.Database,
  locationIds: number[],
  reads: number,
  step: string,
): Promise<number> {
  const orgId = api.orgId;
  const views: [string, string, ReportItem[]][] = [
    ['default (index)', '', sqlReport(db, orgId, 'p.last_seen_at DESC, p.asset_id DESC')],
    ['ascending (index)', '&sort=asset_last_seen', sqlReport(db, orgId, 'p.last_seen_at ASC, p.asset_id ASC')],
    ['with deleted (index)', '&include_deleted=true', sqlReport(db, orgId, 'p.last_seen_at DESC, p.asset_id DESC', undefined, true)],
    ['by asset key (index)', '&sort=asset_external_key', sqlReport(db, orgId, 'a.external_key ASC, p.asset_id ASC')],
    [
      'one location (index)',
      `&location_id=${locationIds[0]}`,
      sqlReport(db, orgId, 'p.last_seen_at DESC, p.asset_id DESC', [locationIds[0]!]),
    ],
    [
      'two locations (SQLite walk)',
      `&location_id=${locationIds[0]}&location_id=${locationIds[1]}&sort=-asset_last_seen`,
      sqlReport(db, orgId, 'p.last_seen_at DESC, p.asset_id DESC', locationIds.slice(0, 2)),
    ],
    ['q (SQLite walk)', '&q=RL-&sort=asset_last_seen', sqlReport(db, orgId, 'p.last_seen_at ASC, p.asset_id ASC')],
  ];
  let mismatches = 0;
  for (const [name, query, want] of views) {
    const got = await apiReport(api, 4, query);
    if (JSON.stringify(got.items) !== JSON.stringify(want) || got.totals.some((n) => n !== want.length)) {
      mismatches++;
      t.fail(`${step}: report ${name}`, { got, want });
    }
  }
  const assetIds = db
    .prepare('SELECT asset_id FROM scan_positions WHERE org_id = ? AND asset_deleted_at IS NULL')
    .pluck()
    .all(orgId) as number[];
  let counted = 0;
  for (const assetId of assetIds) {
    const got: Visit[] = [];
    for (let offset = 0; ; offset += 100) {
      const res = await api.req('GET', `/api/v1/assets/${assetId}/history?limit=100&offset=${offset}`);
      for (const v of res.json.data as Visit[]) got.push(visitOf(v));
      if (offset + 100 >= res.json.total_count) break;
    }
    const want = sqlVisits(db, assetId, true);
    for (const v of got) counted += v.read_count;
    if (JSON.stringify(got) !== JSON.stringify(want)) {
      mismatches++;
      t.fail(`${step}: history of asset ${assetId}`, { got, want });
    }
  }
  const exported = (await api.req('GET', '/api/v1/reports/asset-locations/export')).text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => item2(JSON.parse(l)));
  if (counted !== reads) {
    mismatches++;
    t.fail(`${step}: the visits count ${counted} reads, ${reads} were published`);
  }
  const want = sqlReport(db, orgId, 'p.asset_id ASC');
  if (JSON.stringify(exported) !== JSON.stringify(want)) {
    mismatches++;
    t.fail(`${step}: export`, { got: exported, want });
  }
  return mismatches;
}

/** What the log holds now: its rows, the positions whose own last_seen_at is behind the log's, the fold's state. */
function logState(db: Database.Database) {
  return {
    rows: loggedEntries(db),
    behind: db
      .prepare(`SELECT count(*) FROM scan_positions s JOIN ${POSITIONS} p USING (asset_id) WHERE s.last_seen_at <> p.last_seen_at`)
      .pluck()
      .get() as number,
    fold: db.prepare('SELECT cursor, cycle_seq, folded_through FROM scan_reread_fold').get() as {
      cursor: number;
      cycle_seq: number;
      folded_through: number;
    },
  };
}

async function setUp(trackd: Trackd, name: string, assetCount: number) {
  const api = await assetsClient(trackd, name);
  const locations: { id: number; key: string }[] = [];
  for (let i = 0; i < 3; i++) {
    const res = await api.req('POST', '/api/v1/locations', { external_key: `${name}-L${i}`, name: `L${i}` });
    locations.push({ id: res.json.data.id, key: `${name}-L${i}` });
  }
  const assets: { id: number; tag: string; home: number }[] = [];
  for (let i = 0; i < assetCount; i++) {
    const tag = `${name.toLowerCase()}x${i}`;
    const a = await api.create({
      external_key: `RL-${name}-A${String(i).padStart(2, '0')}`,
      name: `A${i}`,
      tags: [{ tag_type: 'rfid', value: tag }],
    });
    assets.push({ id: a.id, tag, home: i % locations.length });
  }
  return { api, locations, assets };
}

t.test('report, history and export equal scan_positions with the log laid over, after every step and restarts', async (t) => {
  const random = rng(1713);
  const trackd = await startTrackd(t, { env: ENV });
  const { api, locations, assets } = await setUp(trackd, 'RL', 20);
  const nc = await natsClient(t, trackd.natsUrl);
  const db = shardDb(t, trackd.dataDir);
  let at = Date.now() - 86_400_000;
  let mismatches = 0;
  let reads = 0;
  let restartsWithLog = 0;
  const seen = { rows: 0, behind: 0, cursorInside: false, foldedThrough: 0 };
  for (let step = 0; step < 24 && mismatches === 0; step++) {
    let did = 'restart';
    if (step % 8 === 3) {
      // A soft delete of an asset the log holds figures for: the report index takes it out by the key it ranks it by.
      const gone = assets.splice(Math.floor(random() * assets.length), 1)[0]!;
      for (const v of sqlVisits(db, gone.id, true)) reads -= v.read_count;
      t.equal((await api.req('DELETE', `/api/v1/assets/${gone.id}`)).status, 204, `asset ${gone.id} deleted`);
      did = `delete asset ${gone.id}`;
    } else if (step % 8 !== 7) {
      // Mostly re-reads at each asset's place, a few moves (the asset's place changes) and late scans.
      const scans = 1 + Math.floor(random() * 6);
      for (let s = 0; s < scans; s++) {
        const roll = random();
        if (roll < 0.1) {
          const moved = assets[Math.floor(random() * assets.length)]!;
          moved.home = (moved.home + 1) % locations.length;
        }
        const home = Math.floor(random() * locations.length);
        const chosen = assets.filter((a) => a.home === home && random() < 0.7);
        if (chosen.length === 0) continue;
        at += 1000 + Math.floor(random() * 20_000);
        const observed = roll > 0.92 ? at - 600_000 : at;
        await publish(
          nc,
          `scans.${api.orgId}.fixed`,
          scanBody(
            locations[home]!.key,
            chosen.map((a) => `rfid:${a.tag}`),
            new Date(observed),
          ),
        );
        reads += chosen.length;
      }
      await drained(nc);
      did = `${scans} scans`;
    } else {
      // A parked asset, re-read many times, moved just before the restart: the log still holds
      // rows of its old visit, which the restarted writer reads back (and must not fold over the new one).
      const moved = assets[step % assets.length]!;
      moved.home = (moved.home + 1) % locations.length;
      at += 1000;
      await publish(nc, `scans.${api.orgId}.fixed`, scanBody(locations[moved.home]!.key, [`rfid:${moved.tag}`], new Date(at)));
      reads++;
      await drained(nc);
      const held = loggedEntries(db, { distinctAssets: true }) > 0;
      await trackd.restart();
      const started = trackd
        .logs()
        .filter((l) => l.msg === 'shard actor started')
        .at(-1) as { report_index: { rereads: number } };
      restartsWithLog += held && started.report_index.rereads > 0 ? 1 : 0;
      // A fold cycle (a batch per scan) without it: its slice is folded while the old rows are the latest it has.
      const elsewhere = (moved.home + 1) % locations.length;
      const others = assets.filter((a) => a.home === elsewhere).map((a) => `rfid:${a.tag}`);
      for (let k = 0; k < 3 && others.length > 0; k++) {
        at += 1000;
        await publish(nc, `scans.${api.orgId}.fixed`, scanBody(locations[elsewhere]!.key, others, new Date(at)));
        reads += others.length;
        await drained(nc);
      }
    }
    const state = logState(db);
    seen.rows = Math.max(seen.rows, state.rows);
    seen.behind = Math.max(seen.behind, state.behind);
    seen.cursorInside ||= state.fold.cursor > 0;
    seen.foldedThrough = state.fold.folded_through;
    mismatches += await compareAll(
      t,
      api,
      db,
      locations.map((l) => l.id),
      reads,
      `step ${step} (${did})`,
    );
  }
  t.equal(mismatches, 0, 'every report view, history and the export equal to the plain SQL after each step');
  t.ok(restartsWithLog > 0, `restarts with rows in the log read them back (${restartsWithLog} of 3, per the start-up log)`);
  t.ok(
    seen.rows > 0 && seen.behind > 0,
    `the log held re-reads newer than their positions (up to ${seen.rows} rows, ${seen.behind} positions behind)`,
  );
  t.ok(seen.cursorInside && seen.foldedThrough > 0, 'the fold stopped inside the table and deleted the rows of past cycles', seen);
});

t.test('kill -9 while a backlog of re-reads drains: after the restart every read equals the plain SQL', async (t) => {
  const random = rng(99);
  const nats = await startNats(t);
  // Batches of 500 scans: the backlog drains in 16 of them, so the kill lands inside it (one batch of
  // all 8,000 was sometimes applied and acked between two polls of the ack floor).
  const trackd = await spawnTrackd(t, { natsUrl: nats.url, env: { ...ENV, TRACKD_TEST_MAX_BATCH: '500' } });
  const { api, locations, assets } = await setUp(trackd, 'RK', 24);
  const nc = await natsClient(t, nats.url);
  const base = Date.now() - 86_400_000;
  let reads = 0;
  // Every asset placed first, so that the backlog's batches are re-reads (a first read writes its row).
  for (const [home, location] of locations.entries()) {
    const parked = assets.filter((a) => a.home === home).map((a) => `rfid:${a.tag}`);
    await publish(nc, `scans.${api.orgId}.fixed`, scanBody(location.key, parked, new Date(base - 1000)));
    reads += parked.length;
  }
  await drained(nc);
  await trackd.stop('SIGTERM');
  const SCANS = 8_000;
  const bodies = Array.from({ length: SCANS }, (_, i) => {
    // Each asset parked at its home, now and then moved along; a few scans late. Batches of a
    // backlog are large: an asset moved or given a late visit in one writes its row directly.
    if (random() < 0.002) {
      const moved = assets[Math.floor(random() * assets.length)]!;
      moved.home = (moved.home + 1) % locations.length;
    }
    const home = Math.floor(random() * locations.length);
    const chosen = assets.filter((a) => a.home === home && random() < 0.5);
    const at = base + (random() < 0.002 ? Math.floor(random() * i) : i) * 1000;
    const named = chosen.length > 0 ? chosen : [assets[home]!];
    reads += named.length;
    return scanBody(
      locations[home]!.key,
      named.map((a) => `rfid:${a.tag}`),
      new Date(at),
    );
  });
  await publishAll(nc, `scans.${api.orgId}.fixed`, bodies);
  const killedAt = await restartAndKillMidDrain(trackd, nc, 800);
  t.ok(killedAt < SCANS, `killed mid-drain (ack floor ${killedAt} of ${SCANS})`);
  const db = shardDb(t, trackd.dataDir);
  const atKill = logState(db);
  t.ok(atKill.rows > 0, `the log held rows at the kill (${atKill.rows} rows, ${atKill.behind} positions behind)`);
  // The restart reads the log back (the writer's entries, the report index's order) and drains the rest.
  await trackd.restart();
  await drained(nc);
  // Then every asset is read once more where it is, so that the reads below meet positions behind
  // the log: the kill may land after the shard applied the whole backlog (batches run ahead of the
  // ack floor), and the redelivered batches fold the log without adding to it.
  const here = new Map<number, string[]>();
  for (const { asset_id, location_id } of db.prepare('SELECT asset_id, location_id FROM scan_positions').all() as {
    asset_id: number;
    location_id: number;
  }[]) {
    const tags = here.get(location_id) ?? [];
    tags.push(`rfid:${assets.find((a) => a.id === asset_id)!.tag}`);
    here.set(location_id, tags);
  }
  for (const [locationId, tags] of here) {
    await publish(
      nc,
      `scans.${api.orgId}.fixed`,
      scanBody(locations.find((l) => l.id === locationId)!.key, tags, new Date(base + SCANS * 1000)),
    );
    reads += tags.length;
  }
  await drained(nc);
  const after = logState(db);
  t.equal(
    await compareAll(
      t,
      api,
      db,
      locations.map((l) => l.id),
      reads,
      'after the drain',
    ),
    0,
    'drained: equal to the plain SQL',
  );
  t.ok(after.behind > 0, `positions behind the log after the drain (${after.behind}): the reads above laid it over`);
});

t.test('every HTTP thread reads the log between requests and drops what the fold wrote: none is left for the next report', async (t) => {
  const trackd = await startTrackd(t, { env: { ...ENV, HTTP_THREADS: '2' } });
  const { api, locations, assets } = await setUp(trackd, 'RF', 12);
  const nc = await natsClient(t, trackd.natsUrl);
  const db = shardDb(t, trackd.dataDir);
  const held = async () => {
    const text = (await trackd.request('GET', '/metrics')).text;
    return [...text.matchAll(/^trackd_reread_overlay_assets\{thread="(http-\d+)",shard="0"\} (\d+)$/gm)].map((m) => Number(m[2]));
  };
  // Assets with a log row the fold has not yet written and deleted: what each thread must hold.
  const unfolded = () =>
    loggedEntries(db, {
      distinctAssets: true,
      after: db.prepare('SELECT folded_through FROM scan_reread_fold').pluck().get() as number,
    });
  // No report, history or export request in between: only the threads' own following reads the log.
  const holdsOnly = async (want: number) => {
    let last: number[] = [];
    const reached = await eventually(async () => {
      last = await held();
      return last.length === 2 && last.every((n) => n === want);
    }, 5000).then(
      () => true,
      () => false,
    );
    t.ok(reached, `both HTTP threads hold the ${want} assets of the log without a request reading it`, { held: last });
  };
  t.same(await held(), [0, 0], 'each HTTP thread holds nothing of the log at start');
  let at = Date.now() - 3_600_000;
  // One message per batch (each drained before the next), so that what the log holds follows from the steps alone.
  const readAt = async (some: typeof assets) => {
    at += 1000;
    await publish(
      nc,
      `scans.${api.orgId}.fixed`,
      scanBody(
        locations[0]!.key,
        some.map((a) => `rfid:${a.tag}`),
        new Date(at),
      ),
    );
    await drained(nc);
  };
  // Placed (their rows written directly), then re-read where they are: 12 rows in the log.
  await readAt(assets);
  await readAt(assets);
  const first = unfolded();
  t.equal(first, 12, 'the log holds a re-read of each of the 12 assets');
  await holdsOnly(first);
  // Only four re-read, a batch at a time: fold cycles end (7 positions a batch), the other eight's rows are written and deleted.
  for (let k = 0; k < 6; k++) await readAt(assets.slice(0, 4));
  const second = unfolded();
  t.equal(second, 4, 'the fold wrote and deleted the rows of the other 8 assets');
  await holdsOnly(second);
});
