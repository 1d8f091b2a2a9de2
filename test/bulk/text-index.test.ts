/**
 * The q text index after bulk imports (issue 16; migration 016): an import batch pauses the
 * index's triggers and rewrites the rows of the owners it touched once at its end. A list's `q`
 * answers from the index (an ASCII q: from the index alone), so each answer here is compared with
 * the plain LIKE over the shard's rows, after a create import over several batches, after an
 * upsert re-import that renames, re-describes and re-tags rows, and for locations; the index
 * holds one row per owner and nothing of the pause is left behind.
 */
import Database from 'better-sqlite3';
import t, { type Test } from 'tap';
import { shardFile } from '../../src/shards/writer.js';
import { runImport } from '../helpers/bulk.js';
import { startTrackd, type Trackd } from '../helpers/trackd.js';

const ROWS = 2_400; // three batches of the job
const WORDS = ['Forklift', 'Pallet', 'Crane', 'Scanner', 'Dolly', 'Gla\u017fs', '\u212aelvin'];
const word = (i: number, shift: number) => WORDS[(i + shift) % WORDS.length]!;

function assetsCsv(rows: number, version: number): string {
  const lines = ['external_key,name,description,tags'];
  for (let i = 1; i <= rows; i++) {
    const name = `${word(i, version)} ${i}`;
    const description = i % 3 === 0 ? '' : `${word(i, version + 3)} bay ${version}`;
    const tags = i % 5 === 0 ? '' : `rfid:E2${version}${String(i).padStart(8, '0')}${i % 4 === 0 ? `;ble:B${version}-${i}` : ''}`;
    lines.push(`Q-${i},${name},${description},${tags}`);
  }
  return `${lines.join('\n')}\n`;
}

/** The q words asked: each vocabulary word in other cases, pieces of keys, tags and descriptions, and the folded look-alikes. */
const QUERIES = [
  'forklift',
  'PALLET',
  'crane 1',
  'scanner 2',
  'Dolly 19',
  'glass',
  'kelvin',
  'elvin',
  'Gla',
  'Q-12',
  'q-2399',
  'E20000001',
  'E21000002',
  'B1-1',
  'B0-4',
  'bay 0',
  'bay 1',
  'y 1',
];

async function compare(t: Test, trackd: Trackd, token: string, orgId: number, table: 'assets' | 'locations', what: string) {
  const db = new Database(shardFile(trackd.dataDir, 0), { readonly: true });
  try {
    const column = table === 'assets' ? 'asset_id' : 'location_id';
    const like = db.prepare(
      `SELECT o.external_key FROM ${table} o WHERE o.org_id = @org AND o.deleted_at IS NULL AND (o.name LIKE @q OR o.external_key LIKE @q OR o.description LIKE @q
        OR EXISTS (SELECT 1 FROM tags t WHERE t.${column} = o.id AND t.deleted_at IS NULL AND t.value LIKE @q)) ORDER BY o.external_key`,
    );
    for (const q of QUERIES) {
      const expected = (like.all({ q: `%${q}%`, org: orgId }) as { external_key: string }[]).map((r) => r.external_key);
      const res = await trackd.request('GET', `/api/v1/${table}?q=${encodeURIComponent(q)}&limit=200&sort=external_key`, { token });
      t.equal(res.status, 200, res.text);
      t.equal(res.json.total_count, expected.length, `${what}: q=${q} counts the rows LIKE finds (${expected.length})`);
      t.same(
        res.json.data.map((r: { external_key: string }) => r.external_key),
        expected.slice(0, 200),
        `${what}: q=${q} lists the rows LIKE finds`,
      );
    }
    const owners = db.prepare(`SELECT count(*) FROM ${table}`).pluck().get();
    t.equal(db.prepare(`SELECT count(*) FROM ${table}_text`).pluck().get(), owners, `${what}: one index row per ${table} row`);
    t.equal(db.prepare('SELECT count(*) FROM text_index_stale').pluck().get(), 0, `${what}: no owner left marked`);
    t.equal(db.prepare('SELECT count(*) FROM text_index_paused').pluck().get(), 0, `${what}: the pause never committed`);
  } finally {
    db.close();
  }
}

t.test('q after bulk imports answers what LIKE answers', async (t) => {
  const trackd = await startTrackd(t, { env: { SHARDS: '1' } });
  const org = await trackd.createOrg('Bulk Text');
  const { token } = await trackd.createKey(org.id);
  // Rows written one by one (the triggers of every other write) beside the imported ones.
  for (const [key, name] of [
    ['ONE-1', 'Forklift spare'],
    ['ONE-2', 'Crane hook'],
  ]) {
    const res = await trackd.request('POST', '/api/v1/assets', { token, body: { external_key: key, name } });
    t.equal(res.status, 201, res.text);
  }

  const created = await runImport(trackd, token, 'assets', assetsCsv(ROWS, 0));
  t.match(created, { status: 'completed', created: ROWS, failed_rows: 0 });
  await compare(t, trackd, token, org.id, 'assets', 'create import');

  const dry = await runImport(trackd, token, 'assets', assetsCsv(ROWS, 2), { query: 'mode=upsert&dry_run=true' });
  t.match(dry, { status: 'completed', updated: ROWS });
  await compare(t, trackd, token, org.id, 'assets', 'dry run of a renaming upsert');

  // Every row renamed or re-described, tags replaced (the version is in each value), 100 new rows.
  const upserted = await runImport(trackd, token, 'assets', assetsCsv(ROWS + 100, 1), { query: 'mode=upsert' });
  t.match(upserted, { status: 'completed', created: 100, updated: ROWS, failed_rows: 0 });
  await compare(t, trackd, token, org.id, 'assets', 'upsert re-import');

  const atomic = await runImport(trackd, token, 'assets', `${assetsCsv(50, 3)}Q-bad,,,\n`, { query: 'mode=upsert&atomic=true' });
  t.match(atomic, { status: 'completed', updated: 0, failed_rows: 1 });
  await compare(t, trackd, token, org.id, 'assets', 'failed atomic job');

  const locations = ['external_key,name,description,parent_external_key,tags'];
  for (let i = 1; i <= 1_200; i++) {
    locations.push(`Q-${i},${word(i, 0)} ${i},${word(i, 1)} bay 0,${i > 10 ? `Q-${i % 10 || 10}` : ''},${i % 2 ? `ble:B0-${i}` : ''}`);
  }
  const placed = await runImport(trackd, token, 'locations', `${locations.join('\n')}\n`);
  t.match(placed, { status: 'completed', created: 1_200, failed_rows: 0 });
  await compare(t, trackd, token, org.id, 'locations', 'location import');
  const renamed = await runImport(trackd, token, 'locations', `${locations.join('\n').replaceAll('bay 0', 'bay 1')}\n`, {
    query: 'mode=upsert',
  });
  t.match(renamed, { status: 'completed', updated: 1_200 });
  await compare(t, trackd, token, org.id, 'locations', 'location upsert');
});
