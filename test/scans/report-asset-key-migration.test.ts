/**
 * Migration 021 copies each asset's external_key onto its scan position (the report's page reads no
 * longer join assets), and a trigger keeps the copy in step with renames, whoever makes them.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import t from 'tap';
import { shardMigrations } from '../../migrations/shard/index.js';
import { migrate } from '../../src/storage/sqlite.js';

t.test('positions written before 021 carry their asset keys after it, and renames follow', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'trackd-asset-key-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'shard-0.sqlite');
  const before = shardMigrations.findIndex((m) => m.name === '021_report_asset_key');
  t.ok(before > 0, 'migration 021 is registered');
  await migrate(file, shardMigrations.slice(0, before));
  const old = new Database(file);
  const asset = old.prepare(
    `INSERT INTO assets (id, org_id, external_key, name, valid_from, created_at, updated_at, deleted_at)
     VALUES (?, 1, ?, 'n', 0, 0, 0, ?)`,
  );
  const position = old.prepare(
    `INSERT INTO scan_positions (asset_id, org_id, location_id, last_seen_at, visit_id, visit_started_at, visit_read_count, asset_deleted_at)
     VALUES (?, 1, 7, 1000, ?, 900, 1, ?)`,
  );
  const keys = ['A-1', 'ключ-2', 'a key with spaces', 'A-4'];
  for (const [i, key] of keys.entries()) asset.run(i + 1, key, i === 2 ? 5 : null);
  // Asset 4 was never scanned: no position, and none appears.
  for (let id = 1; id <= 3; id++) position.run(id, 100 + id, id === 3 ? 5 : null);
  old.close();

  await migrate(file, shardMigrations);
  const db = new Database(file);
  t.teardown(() => db.close());
  const copies = () => db.prepare('SELECT asset_id, asset_external_key FROM scan_positions ORDER BY asset_id').raw().all();
  t.same(
    copies(),
    [
      [1, 'A-1'],
      [2, 'ключ-2'],
      [3, 'a key with spaces'],
    ],
    'every position, the soft-deleted asset too, carries its asset key',
  );

  db.prepare("UPDATE assets SET external_key = 'A-1-renamed' WHERE id = 1").run();
  db.prepare("UPDATE assets SET name = 'other' WHERE id = 2").run();
  db.prepare(
    `INSERT INTO assets (id, org_id, external_key, name, valid_from, created_at, updated_at) VALUES (3, 1, 'ignored', 'n', 0, 0, 0)
     ON CONFLICT (id) DO UPDATE SET external_key = 'upserted'`,
  ).run();
  t.same(
    copies(),
    [
      [1, 'A-1-renamed'],
      [2, 'ключ-2'],
      [3, 'upserted'],
    ],
    'a rename, by UPDATE or by an upsert, reaches the position; other updates leave the key',
  );
});
