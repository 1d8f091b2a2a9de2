import path from 'node:path';
import Database from 'better-sqlite3';
import t from 'tap';
import { addLowerFunction, substringMatch } from '../../src/masterdata/filters.js';
import { assetsClient } from '../helpers/assets.js';
import { rng } from '../helpers/random.js';
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
