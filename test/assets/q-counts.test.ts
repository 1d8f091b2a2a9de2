import path from 'node:path';
import Database from 'better-sqlite3';
import t from 'tap';
import { addLowerFunction, substringMatch } from '../../src/masterdata/filters.js';
import { textIndexCount } from '../../src/masterdata/textCounts.js';
import { ShardGenerations } from '../../src/shards/generations.js';
import { Shard } from '../../src/shards/shard.js';
import { assetsClient } from '../helpers/assets.js';
import { eventually, startTrackd } from '../helpers/trackd.js';

/**
 * total_count of q lists from the text index less its matches among the rows the scope leaves out
 * (src/masterdata/textCounts.ts) against the plain SQL count on the same shard file: every q and
 * filter set of the table below, before and after writes that change the counts (deletes, renames,
 * is_active and validity changes, tag attaches and detaches, creates in this and another org), a
 * validity boundary passing, and a restart. The index count is also called directly, so that the
 * cases it answers are known to have been answered by it (not by the row-by-row fallback).
 */

const DAY = 86_400_000;
const iso = (ms: number) => new Date(ms).toISOString();
const QUERIES = ['blue', 'pallet', 'CAGE', 'drum-', 'red tote', 'elsewhere', 'nothing', 'ab', 'éclair', '100%', 'e_1'];
/** [query string, is_active, include_deleted] */
const FILTERS: [string, boolean | undefined, boolean][] = [
  ['', undefined, false],
  ['&is_active=true', true, false],
  ['&is_active=false', false, false],
  ['&include_deleted=true', undefined, true],
];
const TABLES = { assets: { path: '/api/v1/assets', column: 'asset_id' }, locations: { path: '/api/v1/locations', column: 'location_id' } };
type Table = keyof typeof TABLES;

t.test('q counts from the text index equal the plain SQL count across writes', async (t) => {
  const trackd = await startTrackd(t, { env: { SHARDS: '1' } });
  const api = await assetsClient(trackd, 'Q Counts');
  const other = await api.otherOrg('Q Counts Other');
  const now = Date.now();
  const ids: Record<Table, number[]> = { assets: [], locations: [] };
  const create = async (client: typeof api, table: Table, body: Record<string, unknown>) => {
    const res = await client.req('POST', TABLES[table].path, body);
    t.equal(res.status, 201, `create ${res.text}`);
    if (client === api) ids[table].push(res.json.data.id);
    return res.json.data as { id: number; tags: { id: number }[] };
  };
  for (const table of Object.keys(TABLES) as Table[]) {
    const rows = table === 'assets' ? 120 : 40;
    for (let i = 0; i < rows; i++) {
      const body: Record<string, unknown> = {
        name: `${i % 2 ? 'Blue' : 'Red'} ${['Pallet', 'Cage', 'Drum', 'Tote'][i % 4]} ${i}`,
        is_active: i % 10 !== 1,
        ...(i % 5 === 0 ? { tags: [{ tag_type: 'barcode', value: `drum-${table}-${i}` }] } : {}),
        ...(i % 40 === 3 ? { valid_from: iso(now + DAY) } : {}),
        ...(i % 40 === 7 ? { valid_from: iso(now - 2 * DAY), valid_to: iso(now - DAY) } : {}),
        ...(i % 30 === 9 ? { description: '100% e_1' } : {}),
      };
      const row = await create(api, table, body);
      if (i % 25 === 0) t.equal((await api.req('DELETE', `${TABLES[table].path}/${row.id}`)).status, 204);
    }
    for (let i = 0; i < 4; i++) await create(other, table, { name: `Blue Pallet elsewhere ${i}` });
  }

  const db = new Database(path.join(trackd.dataDir, 'shards', 'shard-0.sqlite'), { readonly: true, fileMustExist: true });
  t.teardown(() => db.close());
  addLowerFunction(db);
  const shard = new Shard(0, db, undefined as never, new ShardGenerations());

  /** The plain SQL count: every row of the org tested with the exact match. */
  const sqlCount = (table: Table, q: string, active: boolean | undefined, includeDeleted: boolean, at: number): number => {
    const m = substringMatch(q);
    return db
      .prepare(
        `SELECT count(*) FROM ${table} o WHERE o.org_id = ? AND o.valid_from <= ? AND (o.valid_to IS NULL OR o.valid_to > ?)
           AND (? OR o.deleted_at IS NULL) AND (? IS NULL OR o.is_active = ?)
           AND (${m.sql('o.name')} OR ${m.sql('o.external_key')} OR ${m.sql('o.description')}
             OR EXISTS (SELECT 1 FROM tags t WHERE t.${TABLES[table].column} = o.id AND t.deleted_at IS NULL AND ${m.sql('t.value')}))`,
      )
      .pluck()
      .get(
        api.orgId,
        at,
        at,
        includeDeleted ? 1 : 0,
        active === undefined ? null : 1,
        active === undefined ? null : active ? 1 : 0,
        m.value,
        m.value,
        m.value,
        m.value,
      ) as number;
  };

  const answered = new Set<string>();
  let compared = 0;
  const check = async (step: string) => {
    for (const table of Object.keys(TABLES) as Table[]) {
      for (const q of QUERIES) {
        for (const [query, active, includeDeleted] of FILTERS) {
          const res = await api.req('GET', `${TABLES[table].path}?limit=1&q=${encodeURIComponent(q)}${query}`);
          const at = Date.now();
          const want = sqlCount(table, q, active, includeDeleted, at);
          const direct = textIndexCount(shard, table, api.orgId, { q, is_active: active, include_deleted: includeDeleted }, at);
          t.equal(res.json.total_count, want, `${step}: ${table} q=${q}${query}: total_count ${want}`);
          if (direct !== undefined) {
            t.equal(direct, want, `${step}: ${table} q=${q}${query}: the index count ${want}`);
            answered.add(`${table} ${q}${query}`);
          }
          compared++;
        }
      }
    }
  };

  await check('seeded');
  const [blue, pallet] = [ids.assets[1]!, ids.assets[4]!];
  const patch = (table: Table, id: number, body: unknown) =>
    api.req('PATCH', `${TABLES[table].path}/${id}`, body, { contentType: 'application/merge-patch+json' });
  t.equal((await patch('assets', blue, { name: 'Green Crate' })).status, 200);
  t.equal((await patch('assets', ids.assets[3]!, { is_active: false })).status, 200);
  t.equal((await patch('assets', ids.assets[5]!, { valid_from: iso(now - 2 * DAY), valid_to: iso(now - DAY / 2) })).status, 200);
  t.equal((await patch('locations', ids.locations[2]!, { name: 'Blue Drum renamed' })).status, 200);
  t.equal((await api.req('DELETE', `/api/v1/assets/${pallet}`)).status, 204);
  const tagged = await api.attach(ids.assets[6]!, { tag_type: 'barcode', value: 'red tote drum-x' });
  await check('after patches, a delete and a tag attach');
  t.equal((await api.req('DELETE', `/api/v1/assets/${ids.assets[6]}/tags/${tagged.id}`)).status, 204);
  for (let i = 0; i < 3; i++) await create(other, 'assets', { name: `Blue Pallet elsewhere again ${i}` });
  await create(api, 'assets', { name: 'Blue Pallet new', tags: [{ tag_type: 'rfid', value: 'drum-new' }] });
  const soon = Date.now() + 1500;
  await create(api, 'assets', { name: 'Blue Pallet soon', valid_from: iso(soon) });
  await check('after a tag detach and creates');
  await eventually(() => Date.now() > soon + 100, 5000);
  await check('after a validity boundary passed');
  await trackd.restart();
  await check('after a restart');

  t.ok(compared >= 4 * 2 * QUERIES.length * FILTERS.length, `${compared} counts compared`);
  for (const answeredCase of [
    'assets blue',
    'assets blue&is_active=true',
    'assets pallet',
    'locations blue',
    'locations blue&is_active=true',
  ])
    t.ok(answered.has(answeredCase), `the index count answered ${answeredCase}`);
  for (const fallback of [
    'assets elsewhere',
    'assets ab',
    'assets éclair',
    'assets blue&is_active=false',
    'assets blue&include_deleted=true',
  ])
    t.notOk(answered.has(fallback), `${fallback}: counted row by row`);
});

t.test('an org alone on its shard, every row in scope: the count is the index count itself', async (t) => {
  const trackd = await startTrackd(t, { env: { SHARDS: '1' } });
  const api = await assetsClient(trackd, 'Q Counts Alone');
  for (const name of ['Blue Pallet 1', 'Blue Cage 2', 'Red Drum 3']) await api.create({ name });
  const db = new Database(path.join(trackd.dataDir, 'shards', 'shard-0.sqlite'), { readonly: true, fileMustExist: true });
  t.teardown(() => db.close());
  const shard = new Shard(0, db, undefined as never, new ShardGenerations());
  const cases: [string, boolean | undefined, number][] = [
    ['blue', undefined, 2],
    ['blue', true, 2],
    ['drum', undefined, 1],
    ['nothing', undefined, 0],
  ];
  for (const [q, active, want] of cases) {
    t.equal(textIndexCount(shard, 'assets', api.orgId, { q, is_active: active }, Date.now()), want, `q=${q} is_active=${active}: ${want}`);
    const res = await api.req('GET', `/api/v1/assets?limit=1&q=${q}${active === undefined ? '' : `&is_active=${active}`}`);
    t.equal(res.json.total_count, want, `q=${q} is_active=${active}: total_count ${want}`);
  }
});
