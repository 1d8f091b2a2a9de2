import path from 'node:path';
import Database from 'better-sqlite3';
import t from 'tap';
import { addLowerFunction, substringMatch } from '../../src/masterdata/filters.js';
import { assetsClient } from '../helpers/assets.js';
import { rng } from '../helpers/random.js';
import { drained, natsClient, publish, scanBody } from '../helpers/scans.js';
import { startTrackd } from '../helpers/trackd.js';

/**
 * The lists' `q` through the text index (migration 013, src/masterdata/textIndex.ts) against the
 * plain SQL answer on the same shard file (every row of the org tested with the exact match):
 * after every step of a random program of creates, renames, description changes, soft deletes, tag
 * attaches and detaches and restarts, for assets and locations, the total_count and every id of the
 * list (by key, by name descending, a short first page, include_deleted) are the ones SQLite gives.
 * Names mix the code points where JavaScript's lowercase and the index's fold part ways.
 */

const WORDS = [
  'Blue',
  'Pallet',
  'cage',
  'ÉCLAIR',
  'İzmir',
  'ızgara',
  '\u212aelvin',
  'ſtraße',
  'ΣΟΦΙΑΣ',
  'σοφός',
  '\u13a0\u13a1\u13a2',
  'drum',
];
const QUERIES = [
  'pallet',
  'PAL',
  'all',
  'izm',
  'İzm',
  'i̇zm',
  'zmi',
  'éclair',
  'ÉCL',
  'kel',
  'elvin',
  'stra',
  'ſtr',
  'σοφ',
  'ΟΦΙ',
  'φια',
  'ιας',
  'ꭰꭱꭲ',
  '\u13a0\u13a1',
  'ue pa',
  'ab',
  'ge',
  'x"y',
  '1%',
];
const TABLES = {
  assets: { path: '/api/v1/assets', column: 'asset_id' },
  locations: { path: '/api/v1/locations', column: 'location_id' },
} as const;
type Table = keyof typeof TABLES;

t.test('q lists equal the plain SQL answer after every step', async (t) => {
  const random = rng(1313);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)]!;
  const phrase = () => Array.from({ length: 1 + Math.floor(random() * 3) }, () => pick(WORDS)).join(random() < 0.8 ? ' ' : '');
  const trackd = await startTrackd(t, { env: { SHARDS: '1' } });
  const api = await assetsClient(trackd, 'Q Index');
  await api.otherOrg('Q Index Other').then((other) => other.create({ name: 'Blue Pallet elsewhere' }));
  const db = new Database(path.join(trackd.dataDir, 'shards', 'shard-0.sqlite'), { readonly: true, fileMustExist: true });
  t.teardown(() => db.close());
  addLowerFunction(db);

  const rows: { table: Table; id: number; deleted: boolean; tags: number[] }[] = [];
  let tagSeq = 0;
  const tag = () => ({ tag_type: 'barcode', value: `${pick(WORDS)}-${tagSeq++}` });

  /** The ids the plain SQL answer gives, in the list's order. */
  const sqlIds = (table: Table, q: string, includeDeleted: boolean, order: string): number[] => {
    const m = substringMatch(q);
    const now = Date.now();
    return db
      .prepare(
        `SELECT o.id FROM ${table} o WHERE o.org_id = ? AND o.valid_from <= ? AND (o.valid_to IS NULL OR o.valid_to > ?)
           AND (? OR o.deleted_at IS NULL)
           AND (${m.sql('o.name')} OR ${m.sql('o.external_key')} OR ${m.sql('o.description')}
             OR EXISTS (SELECT 1 FROM tags t WHERE t.${TABLES[table].column} = o.id AND t.deleted_at IS NULL AND ${m.sql('t.value')}))
         ORDER BY ${order}`,
      )
      .pluck()
      .all(api.orgId, now, now, includeDeleted ? 1 : 0, m.value, m.value, m.value, m.value) as number[];
  };

  let mismatches = 0;
  let matched = 0;
  const check = async (step: string) => {
    const live = rows.filter((r) => !r.deleted);
    for (const table of Object.keys(TABLES) as Table[]) {
      // Fixed q and a stretch of a live row's name.
      const own = live.filter((r) => r.table === table);
      const extra: string[] = [];
      if (own.length > 0) {
        const res = await api.req('GET', `${TABLES[table].path}/${pick(own).id}`);
        const name = [...(res.json.data.name as string)];
        const start = Math.floor(random() * Math.max(1, name.length - 3));
        extra.push(name.slice(start, start + 3 + Math.floor(random() * 4)).join(''));
      }
      for (const q of [...QUERIES.filter(() => random() < 0.2), ...extra]) {
        const views: [string, boolean, string][] = [
          ['', false, 'o.external_key, o.id'],
          ['&include_deleted=true', true, 'o.external_key, o.id'],
          ['&sort=-name', false, 'o.name DESC, o.id ASC'],
        ];
        for (const [query, includeDeleted, order] of views) {
          const want = sqlIds(table, q, includeDeleted, order);
          if (want.length > 0) matched++;
          const all = await api.req('GET', `${TABLES[table].path}?limit=200&q=${encodeURIComponent(q)}${query}`);
          const first = await api.req('GET', `${TABLES[table].path}?limit=2&q=${encodeURIComponent(q)}${query}`);
          const got = {
            total: all.json.total_count,
            ids: all.json.data.map((r: { id: number }) => r.id),
            firstTotal: first.json.total_count,
            firstIds: first.json.data.map((r: { id: number }) => r.id),
          };
          const expected = { total: want.length, ids: want, firstTotal: want.length, firstIds: want.slice(0, 2) };
          if (JSON.stringify(got) !== JSON.stringify(expected)) {
            mismatches++;
            t.fail(`${step}: ${table} q=${JSON.stringify(q)}${query}`, { got, want: expected });
          }
        }
      }
    }
  };

  for (let step = 0; step < 60 && mismatches === 0; step++) {
    const table: Table = random() < 0.7 ? 'assets' : 'locations';
    const live = rows.filter((r) => !r.deleted && r.table === table);
    const roll = random();
    let did: string;
    if (roll < 0.35 || live.length < 3) {
      const body = { name: phrase(), description: random() < 0.5 ? phrase() : null, tags: random() < 0.6 ? [tag()] : [] };
      const res = await api.req('POST', TABLES[table].path, body);
      t.equal(res.status, 201, `create ${res.text}`);
      rows.push({ table, id: res.json.data.id, deleted: false, tags: res.json.data.tags.map((g: { id: number }) => g.id) });
      did = `create ${table} ${JSON.stringify(body)}`;
    } else if (roll < 0.55) {
      const row = pick(live);
      const body = random() < 0.6 ? { name: phrase() } : { description: random() < 0.7 ? phrase() : null };
      const res = await api.req('PATCH', `${TABLES[table].path}/${row.id}`, body, { contentType: 'application/merge-patch+json' });
      t.equal(res.status, 200, `patch ${res.text}`);
      did = `patch ${table} ${row.id} ${JSON.stringify(body)}`;
    } else if (roll < 0.7) {
      const row = pick(live);
      const body = tag();
      const res = await api.req('POST', `${TABLES[table].path}/${row.id}/tags`, body);
      t.equal(res.status, 201, `attach ${res.text}`);
      row.tags.push(res.json.data.id);
      did = `attach ${JSON.stringify(body)} to ${table} ${row.id}`;
    } else if (roll < 0.82) {
      const tagged = live.filter((r) => r.tags.length > 0);
      if (tagged.length === 0) continue;
      const row = pick(tagged);
      const tagId = row.tags.pop()!;
      const res = await api.req('DELETE', `${TABLES[table].path}/${row.id}/tags/${tagId}`);
      t.equal(res.status, 204, `detach ${res.text}`);
      did = `detach tag ${tagId} from ${table} ${row.id}`;
    } else if (roll < 0.95) {
      const row = pick(live);
      const res = await api.req('DELETE', `${TABLES[table].path}/${row.id}`);
      t.equal(res.status, 204, `delete ${res.text}`);
      row.deleted = true;
      did = `delete ${table} ${row.id}`;
    } else {
      await trackd.restart();
      did = 'restart';
    }
    await check(`step ${step} (${did})`);
  }
  t.ok(matched > 200, `the program's q matched rows (${matched} views with matches)`);
  t.equal(mismatches, 0, 'every q list equal to the plain SQL answer after each step');
});

t.test('the report with q equals the plain SQL answer after every step', async (t) => {
  const random = rng(1314);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)]!;
  const phrase = () => Array.from({ length: 1 + Math.floor(random() * 3) }, () => pick(WORDS)).join(' ');
  const trackd = await startTrackd(t, { env: { SHARDS: '1' } });
  const api = await assetsClient(trackd, 'Q Report');
  const nc = await natsClient(t, trackd.natsUrl);
  const db = new Database(path.join(trackd.dataDir, 'shards', 'shard-0.sqlite'), { readonly: true, fileMustExist: true });
  t.teardown(() => db.close());
  addLowerFunction(db);
  for (const key of ['QR-L0', 'QR-L1']) await api.req('POST', '/api/v1/locations', { external_key: key, name: key });
  const assets: { id: number; rfid: string; tags: number[]; deleted: boolean }[] = [];
  for (let i = 0; i < 30; i++) {
    const a = await api.create({
      name: phrase(),
      description: phrase(),
      tags: [
        { tag_type: 'rfid', value: `qr${i}` },
        { tag_type: 'barcode', value: `${pick(WORDS)}-${i}` },
      ],
    });
    assets.push({ id: a.id, rfid: `qr${i}`, tags: [a.tags[1].id], deleted: false });
  }
  for (const [i, key] of ['QR-L0', 'QR-L1'].entries()) {
    await publish(
      nc,
      `scans.${api.orgId}.fixed`,
      scanBody(
        key,
        assets.filter((_, j) => j % 2 === i).map((a) => `rfid:${a.rfid}`),
      ),
    );
  }
  await drained(nc);

  /** The asset ids the plain SQL answer gives, by asset external key (the report's q: name, key, live tags; no description). */
  const sqlIds = (q: string, includeDeleted: boolean): number[] => {
    const m = substringMatch(q);
    const now = Date.now();
    return db
      .prepare(
        `SELECT p.asset_id FROM scan_positions p JOIN assets a ON a.id = p.asset_id
         WHERE p.org_id = ? AND a.valid_from <= ? AND (a.valid_to IS NULL OR a.valid_to > ?) AND (? OR a.deleted_at IS NULL)
           AND (${m.sql('a.name')} OR ${m.sql('a.external_key')}
             OR EXISTS (SELECT 1 FROM tags t WHERE t.asset_id = a.id AND t.deleted_at IS NULL AND ${m.sql('t.value')}))
         ORDER BY a.external_key, p.asset_id`,
      )
      .pluck()
      .all(api.orgId, now, now, includeDeleted ? 1 : 0, m.value, m.value, m.value) as number[];
  };
  let mismatches = 0;
  let matched = 0;
  for (let step = 0; step < 30 && mismatches === 0; step++) {
    const live = assets.filter((a) => !a.deleted);
    const row = pick(live);
    const roll = random();
    let did: string;
    if (roll < 0.35) {
      const body = random() < 0.6 ? { name: phrase() } : { description: phrase() };
      t.equal((await api.req('PATCH', `/api/v1/assets/${row.id}`, body, { contentType: 'application/merge-patch+json' })).status, 200);
      did = `patch ${row.id} ${JSON.stringify(body)}`;
    } else if (roll < 0.6) {
      const body = { tag_type: 'barcode', value: `${pick(WORDS)}-${step}-x` };
      const res = await api.req('POST', `/api/v1/assets/${row.id}/tags`, body);
      t.equal(res.status, 201);
      row.tags.push(res.json.data.id);
      did = `attach ${JSON.stringify(body)} to ${row.id}`;
    } else if (roll < 0.8 && row.tags.length > 0) {
      const tagId = row.tags.pop()!;
      t.equal((await api.req('DELETE', `/api/v1/assets/${row.id}/tags/${tagId}`)).status, 204);
      did = `detach ${tagId} from ${row.id}`;
    } else if (roll < 0.95) {
      t.equal((await api.req('DELETE', `/api/v1/assets/${row.id}`)).status, 204);
      row.deleted = true;
      did = `delete ${row.id}`;
    } else {
      await trackd.restart();
      did = 'restart';
    }
    for (const q of [...QUERIES.filter(() => random() < 0.3), 'qr1', 'qr2']) {
      for (const includeDeleted of [false, true]) {
        const want = sqlIds(q, includeDeleted);
        if (want.length > 0) matched++;
        const res = await api.req(
          'GET',
          `/api/v1/reports/asset-locations?limit=200&sort=asset_external_key&q=${encodeURIComponent(q)}${includeDeleted ? '&include_deleted=true' : ''}`,
        );
        const got = { total: res.json.total_count, ids: res.json.data?.map((r: { asset_id: number }) => r.asset_id) };
        if (JSON.stringify(got) !== JSON.stringify({ total: want.length, ids: want })) {
          mismatches++;
          t.fail(`step ${step} (${did}): q=${JSON.stringify(q)} include_deleted=${includeDeleted}`, { got, want });
        }
      }
    }
  }
  t.ok(matched > 60, `the program's q matched positions (${matched} views with matches)`);
  t.equal(mismatches, 0, 'every report with q equal to the plain SQL answer after each step');
});
