/**
 * Planner statistics after a bulk job (issue 16): a shard whose statistics were taken before an
 * org existed (at its open) plans that org's queries as if it were empty, since SQLite plans with
 * the bound values against STAT4 samples. A job that created a good part of its table re-analyzes
 * it when it finishes: here the owner's live tags, asked without `+org_id` (the form that made the
 * bench's upsert batches take seconds, bench/results/bulk-503-evidence.json), are searched by the
 * owner's index for the new org, and the statistics count the rows the job added.
 */
import Database from 'better-sqlite3';
import t from 'tap';
import { shardFile } from '../../src/shards/writer.js';
import { runImport } from '../helpers/bulk.js';
import { startTrackd } from '../helpers/trackd.js';

/** The bench's seeded shape: an rfid tag on every asset, a barcode on every third. */
function assetsCsv(prefix: string, rows: number): string {
  const lines = ['external_key,name,tags'];
  for (let i = 1; i <= rows; i++)
    lines.push(`${prefix}-${i},Asset ${i},rfid:${prefix}R${i}${i % 3 === 0 ? `;barcode:${prefix}B${i}` : ''}`);
  return `${lines.join('\n')}\n`;
}

t.test('a job that filled a new org leaves statistics that know it', async (t) => {
  const trackd = await startTrackd(t, { env: { SHARDS: '1' } });
  const first = await trackd.createOrg('Seeded');
  const firstKey = await trackd.createKey(first.id);
  t.match(await runImport(trackd, firstKey.token, 'assets', assetsCsv('A', 600)), { status: 'completed', created: 600 });
  // Statistics as a shard holding only the first org takes them when it opens.
  await trackd.restart();

  const second = await trackd.createOrg('Imported');
  const secondKey = await trackd.createKey(second.id);
  t.match(await runImport(trackd, secondKey.token, 'assets', assetsCsv('B', 600)), { status: 'completed', created: 600 });

  const db = new Database(shardFile(trackd.dataDir, 0), { readonly: true });
  t.teardown(() => db.close());
  const owner = db.prepare("SELECT id FROM assets WHERE org_id = ? AND external_key = 'B-1'").pluck().get(second.id) as number;
  const plan = db
    .prepare('EXPLAIN QUERY PLAN SELECT id, tag_type, value FROM tags WHERE asset_id = ? AND org_id = ? AND deleted_at IS NULL')
    .all(owner, second.id) as { detail: string }[];
  t.same(
    plan.map((r) => r.detail),
    ['SEARCH tags USING INDEX tags_asset (asset_id=?)'],
    "the new org's owner: its own index, not every live tag of the org",
  );
  const tagRows = db.prepare("SELECT stat FROM sqlite_stat1 WHERE tbl = 'tags' AND idx = 'tags_asset'").pluck().get() as string;
  t.equal(Number(tagRows.split(' ')[0]), 2 * (600 + 200), 'the statistics count tags of both orgs');
});
