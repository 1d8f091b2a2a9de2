/**
 * The upsert row path's lookup of an owner's live tags searches the owner's index on a shard whose
 * planner statistics were taken before the importing org existed (the writer's `optimize` at open,
 * with STAT4 samples: SQLite plans with the bound values, and an org absent from the samples looks
 * empty). Without `+org_id` SQLite chose tags_live_natural_key on org_id alone there: every live tag
 * of the org for each row, which made the 100,000-row bench's upsert batches on the seeded org's
 * shard take seconds each until one waited past its deadline (503).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { shardMigrations } from '../../migrations/shard/index.js';
import { liveTagsSql } from '../../src/bulk/tagRows.js';
import { migrate, openDatabase } from '../../src/storage/sqlite.js';

t.test('live tags of an owner: searched by the owner index on an analyzed shard', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bulk-plans-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'shard.sqlite');
  await migrate(file, shardMigrations);
  const db = openDatabase(file);
  t.teardown(() => db.close());
  const asset = db.prepare(
    'INSERT INTO assets (id, org_id, external_key, name, metadata, valid_from, created_at, updated_at) VALUES (?, 1, ?, ?, ?, 0, 0, 0)',
  );
  const location = db.prepare(
    'INSERT INTO locations (id, org_id, external_key, name, valid_from, created_at, updated_at) VALUES (?, 1, ?, ?, 0, 0, 0)',
  );
  const tag = db.prepare('INSERT INTO tags (id, org_id, tag_type, value, asset_id, location_id, created_at) VALUES (?, 1, ?, ?, ?, ?, 0)');
  // The bench's seeded shard: one org, an rfid tag on every asset and a barcode on every third, no location tags.
  db.transaction(() => {
    for (let i = 1; i <= 500; i++) {
      asset.run(i, `A-${i}`, `asset ${i}`, '{}');
      tag.run(i, 'rfid', `A${i}`, i, null);
      if (i % 3 === 0) tag.run(1000 + i, 'barcode', `B${i}`, i, null);
    }
    for (let i = 1; i <= 100; i++) location.run(i, `L-${i}`, `location ${i}`);
  })();
  db.exec('ANALYZE');
  const cases = [
    { column: 'asset_id', index: 'tags_asset' },
    { column: 'location_id', index: 'tags_location' },
  ] as const;
  for (const { column, index } of cases) {
    // Owner 1 of org 2: an org the statistics never saw.
    const plan = (db.prepare(`EXPLAIN QUERY PLAN ${liveTagsSql(column)}`).all(1, 2) as { detail: string }[]).map((r) => r.detail);
    t.same(plan, [`SEARCH tags USING INDEX ${index} (${column}=?)`], `${column}: the owner's index`);
  }
});
