import t from 'tap';
import { type AssetsClient, assetsClient } from '../helpers/assets.js';
import { rng } from '../helpers/random.js';
import { drained, natsClient, publish, publishAll, restartAndKillMidDrain, scanBody } from '../helpers/scans.js';
import { spawnTrackd, startNats, startTrackd, testClock } from '../helpers/trackd.js';

/**
 * The report's in-memory order (the shard actor's rank indexes) against a model of what the scans
 * and writes imply, after every step of random programs: scans (late ones too, several assets per
 * scan so that times tie), soft deletes, validity windows opened and closed, the clock moved past
 * boundaries with no write, and restarts (the index rebuilt from SQLite). Each check pages through
 * the whole report in both orders, per location by id and by external key, and through SQLite's
 * walk (a location filter given twice is answered there) to compare the two paths, and checks each
 * row's asset key too (read from the copy on its position, shard migration 021).
 */

interface ModelAsset {
  id: number;
  key: string;
  tag: string;
  lastSeen?: number;
  location?: number;
  deleted: boolean;
  validFrom: number;
  validTo: number | null;
}

const PAGE = 7;

/** The report's default order: last seen first, ties by id descending. */
const reportOrder = (x: { id: number; lastSeen?: number }, y: { id: number; lastSeen?: number }) =>
  y.lastSeen! - x.lastSeen! || y.id - x.id;

/** Every page of one report view (`query` appended to the path), in order, with the total the last page gave. */
async function pages(api: AssetsClient, limit: number, query: string): Promise<{ total: number; ids: number[]; keys: string[] }> {
  const ids: number[] = [];
  const keys: string[] = [];
  let total = -1;
  for (let offset = 0; ; offset += limit) {
    const res = await api.req('GET', `/api/v1/reports/asset-locations?limit=${limit}&offset=${offset}${query}`);
    if (res.status !== 200) throw new Error(`report ${query}: ${res.status} ${res.text}`);
    total = res.json.total_count;
    for (const row of res.json.data as { asset_id: number; asset_external_key: string }[]) {
      ids.push(row.asset_id);
      keys.push(row.asset_external_key);
    }
    if (offset + limit >= total) break;
  }
  return { total, ids, keys };
}

for (const seed of [1, 2]) {
  t.test(`report pages equal the model after every step (seed ${seed})`, async (t) => {
    const random = rng(seed * 7919);
    const pick = <T>(items: T[]): T => items[Math.floor(random() * items.length)]!;
    const clock = testClock();
    const trackd = await startTrackd(t, { clock, env: { SHARDS: '1', HISTORY_GAP_SECONDS: '0' } });
    const api = await assetsClient(trackd, `Report Index ${seed}`);
    const nc = await natsClient(t, trackd.natsUrl);

    const locations: { id: number; key: string }[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await api.req('POST', '/api/v1/locations', { external_key: `RI-${seed}-L${i}`, name: `L${i}` });
      locations.push({ id: res.json.data.id, key: `RI-${seed}-L${i}` });
    }
    const assets: ModelAsset[] = [];
    for (let i = 0; i < 24; i++) {
      const tag = `ri${seed}x${i}`;
      const a = await api.create({ external_key: `RI-${seed}-A${i}`, name: `A${i}`, tags: [{ tag_type: 'rfid', value: tag }] });
      assets.push({ id: a.id, key: `RI-${seed}-A${i}`, tag, deleted: false, validFrom: Date.parse(a.valid_from), validTo: null });
    }

    const base = clock.now() - 86_400_000;
    const usedTimes = new Set<number>();
    const boundaries = () => assets.flatMap((a) => [a.validFrom, ...(a.validTo === null ? [] : [a.validTo])]);
    /** Moves the clock past any validity boundary near now, so that a check's requests all see one state. */
    const quietClock = () => {
      for (;;) {
        const now = clock.now();
        const near = boundaries().find((b) => b >= now && b <= now + 1500);
        if (near === undefined) return now;
        clock.advance(near - now + 1);
      }
    };
    const expected = (now: number, locationId?: number, withDeleted = false) =>
      assets
        .filter(
          (a) => a.lastSeen !== undefined && (withDeleted || !a.deleted) && a.validFrom <= now && (a.validTo === null || a.validTo > now),
        )
        .filter((a) => locationId === undefined || a.location === locationId)
        .sort(reportOrder)
        .map((a) => a.id);
    let mismatches = 0;
    const check = async (step: string) => {
      const now = quietClock();
      const want = expected(now);
      const views: [string, { total: number; ids: number[]; keys: string[] }, number[]][] = [
        ['default', await pages(api, PAGE, ''), want],
        ['ascending', await pages(api, PAGE, '&sort=asset_last_seen'), [...want].reverse()],
      ];
      const byKey = assets
        .filter((a) => want.includes(a.id))
        .sort((x, y) => (x.key < y.key ? -1 : x.key > y.key ? 1 : x.id - y.id))
        .map((a) => a.id);
      const keyOf = new Map(locations.map((l) => [l.id, l.key]));
      const byLocationKey = assets
        .filter((a) => want.includes(a.id))
        .sort((x, y) => {
          const kx = keyOf.get(x.location!)!;
          const ky = keyOf.get(y.location!)!;
          return kx < ky ? -1 : kx > ky ? 1 : x.id - y.id;
        })
        .map((a) => a.id);
      const withDeleted = expected(now, undefined, true);
      const everyLocation = locations.map((l) => `&location_id=${l.id}`).join('');
      views.push(
        ['include_deleted', await pages(api, PAGE, '&include_deleted=true'), withDeleted],
        ['include_deleted ascending', await pages(api, PAGE, '&include_deleted=true&sort=asset_last_seen'), [...withDeleted].reverse()],
        ['include_deleted through SQLite', await pages(api, PAGE, `&include_deleted=true${everyLocation}`), withDeleted],
        ['asset_external_key', await pages(api, PAGE, '&sort=asset_external_key'), byKey],
        ['-asset_external_key', await pages(api, PAGE, '&sort=-asset_external_key'), [...byKey].reverse()],
        ['asset_external_key through SQLite', await pages(api, PAGE, `&sort=asset_external_key${everyLocation}`), byKey],
        ['location_external_key', await pages(api, PAGE, '&sort=location_external_key'), byLocationKey],
        ['-location_external_key', await pages(api, PAGE, '&sort=-location_external_key'), [...byLocationKey].reverse()],
        ['location_external_key through SQLite', await pages(api, PAGE, `&sort=location_external_key${everyLocation}`), byLocationKey],
      );
      for (const l of locations) {
        const here = expected(now, l.id);
        views.push([`location ${l.id}`, await pages(api, PAGE, `&location_id=${l.id}`), here]);
        views.push([
          `location ${l.key} ascending`,
          await pages(api, PAGE, `&location_external_key=${l.key}&sort=asset_last_seen`),
          [...here].reverse(),
        ]);
        views.push([`location ${l.id} through SQLite`, await pages(api, PAGE, `&location_id=${l.id}&location_id=${l.id}`), here]);
      }
      const modelKey = new Map(assets.map((a) => [a.id, a.key]));
      for (const [name, got, ids] of views) {
        const keys = ids.map((id) => modelKey.get(id));
        if (
          got.total !== ids.length ||
          JSON.stringify(got.ids) !== JSON.stringify(ids) ||
          JSON.stringify(got.keys) !== JSON.stringify(keys)
        ) {
          mismatches++;
          t.fail(`${step}: ${name}`, { got, want: { total: ids.length, ids, keys } });
        }
      }
    };

    const steps: string[] = [];
    for (let step = 0; step < 40; step++) {
      const roll = random();
      let did: string;
      if (roll < 0.55) {
        const location = pick(locations);
        const chosen = [...new Set(Array.from({ length: 1 + Math.floor(random() * 4) }, () => pick(assets)))];
        let at: number;
        do at = base + Math.floor(random() * 3_600_000);
        while (usedTimes.has(at));
        usedTimes.add(at);
        await publish(
          nc,
          `scans.${api.orgId}.fixed`,
          scanBody(
            location.key,
            chosen.map((a) => `rfid:${a.tag}`),
            new Date(at),
          ),
        );
        await drained(nc);
        for (const a of chosen) {
          if (a.deleted || (a.lastSeen !== undefined && a.lastSeen > at)) continue;
          a.lastSeen = at;
          a.location = location.id;
        }
        did = `scan of ${chosen.length} at ${location.key}`;
      } else if (roll < 0.565) {
        const l = pick(locations);
        const key = `RI-${seed}-M${step}`;
        const res = await api.req('POST', `/api/v1/locations/${l.id}/rename`, { external_key: key });
        t.equal(res.status, 200, `rename location ${l.id}: ${res.text}`);
        l.key = key;
        did = `rename location ${l.id} to ${key}`;
      } else if (roll < 0.59) {
        const a = pick(assets.filter((x) => !x.deleted));
        const key = `RI-${seed}-R${step}`;
        const res = await api.req('POST', `/api/v1/assets/${a.id}/rename`, { external_key: key });
        t.equal(res.status, 200, `rename ${a.id}: ${res.text}`);
        a.key = key;
        did = `rename ${a.id} to ${key}`;
      } else if (roll < 0.64) {
        const a = pick(assets);
        const res = await api.req('DELETE', `/api/v1/assets/${a.id}`);
        if (!a.deleted) t.equal(res.status, 204, `delete ${a.id}`);
        a.deleted = true;
        did = `delete ${a.id}`;
      } else if (roll < 0.75) {
        const a = pick(assets.filter((x) => !x.deleted));
        const now = clock.now();
        const body =
          random() < 0.5
            ? { valid_to: new Date(Math.max(a.validFrom, now) + 300 + Math.floor(random() * 4000)).toISOString() }
            : { valid_from: new Date(now + 300 + Math.floor(random() * 4000)).toISOString(), valid_to: null };
        const res = await api.req('PATCH', `/api/v1/assets/${a.id}`, body, { contentType: 'application/merge-patch+json' });
        t.equal(res.status, 200, `patch ${a.id} ${JSON.stringify(body)}: ${res.text}`);
        a.validFrom = Date.parse(res.json.data.valid_from);
        a.validTo = res.json.data.valid_to === null ? null : Date.parse(res.json.data.valid_to);
        did = `patch ${a.id} ${JSON.stringify(body)}`;
      } else if (roll < 0.93) {
        const ms = Math.floor(random() * 3000);
        clock.advance(ms);
        did = `clock +${ms} ms`;
      } else {
        await trackd.restart();
        did = 'restart';
      }
      steps.push(did);
      await check(`step ${step} (${did})`);
      if (mismatches > 0) break;
    }
    t.equal(mismatches, 0, `every view equal to the model after each of ${steps.length} steps`);
    t.ok(
      assets.some((a) => a.lastSeen !== undefined && !a.deleted),
      'the program left scanned live assets to report',
    );
  });
}

t.test('kill -9 while a backlog of scans drains: after the restart the index equals the model and the SQLite walk', async (t) => {
  const random = rng(4242);
  const nats = await startNats(t);
  const trackd = await spawnTrackd(t, { natsUrl: nats.url, env: { SHARDS: '1' } });
  const api = await assetsClient(trackd, 'Report Index Kill');
  const nc = await natsClient(t, nats.url);
  const locations: { id: number; key: string }[] = [];
  for (let i = 0; i < 5; i++) {
    const res = await api.req('POST', '/api/v1/locations', { external_key: `RK-L${i}`, name: `L${i}` });
    locations.push({ id: res.json.data.id, key: `RK-L${i}` });
  }
  const assets: { id: number; tag: string; lastSeen?: number; location?: number }[] = [];
  for (let i = 0; i < 120; i++) {
    const a = await api.create({ external_key: `RK-A${i}`, name: `A${i}`, tags: [{ tag_type: 'rfid', value: `rk${i}` }] });
    assets.push({ id: a.id, tag: `rk${i}` });
  }
  await trackd.stop('SIGTERM');

  // A backlog in shuffled time order (late scans), several assets per scan (ties within a scan).
  const SCANS = 12_000;
  const times = Array.from({ length: SCANS }, (_, i) => i);
  for (let i = times.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [times[i], times[j]] = [times[j]!, times[i]!];
  }
  const base = Date.now() - 86_400_000;
  // The first 40 assets are only in the first 1,000 scans, all applied before the kill: after the
  // restart their places come from the index's rebuild alone (no later scan moves them again).
  const PARKED = 40;
  const bodies = times.map((step, i) => {
    const at = base + step * 1000;
    const location = locations[Math.floor(random() * locations.length)]!;
    const from = i < 1000 ? 0 : PARKED;
    const chosen = [
      ...new Set(
        Array.from({ length: 1 + Math.floor(random() * 12) }, () => assets[from + Math.floor(random() * (assets.length - from))]!),
      ),
    ];
    for (const a of chosen) {
      if (a.lastSeen !== undefined && a.lastSeen > at) continue;
      a.lastSeen = at;
      a.location = location.id;
    }
    return scanBody(
      location.key,
      chosen.map((a) => `rfid:${a.tag}`),
      new Date(at),
    );
  });
  await publishAll(nc, `scans.${api.orgId}.fixed`, bodies);
  const killedAt = await restartAndKillMidDrain(trackd, nc, 2000);
  t.ok(killedAt >= 1000 && killedAt < SCANS, `killed mid-drain, after the parked assets' scans (ack floor ${killedAt} of ${SCANS})`);
  await trackd.restart();
  await drained(nc);

  const expected = (locationId?: number) =>
    assets
      .filter((a) => a.lastSeen !== undefined && (locationId === undefined || a.location === locationId))
      .sort(reportOrder)
      .map((a) => a.id);
  const everyLocation = locations.map((l) => `&location_id=${l.id}`).join('');
  const want = expected();
  const views: [string, { total: number; ids: number[]; keys: string[] }, number[]][] = [
    ['default', await pages(api, 20, ''), want],
    ['ascending', await pages(api, 20, '&sort=asset_last_seen'), [...want].reverse()],
    ['every location through SQLite', await pages(api, 20, everyLocation), want],
  ];
  for (const l of locations) {
    const here = expected(l.id);
    views.push([`location ${l.id}`, await pages(api, 20, `&location_id=${l.id}`), here]);
    views.push([`location ${l.id} through SQLite`, await pages(api, 20, `&location_id=${l.id}&location_id=${l.id}`), here]);
  }
  const keyOf = new Map(assets.map((a, i) => [a.id, `RK-A${i}`]));
  for (const [name, got, ids] of views)
    t.same(got, { total: ids.length, ids, keys: ids.map((id) => keyOf.get(id)) }, `${name}: equal to the model`);
});
