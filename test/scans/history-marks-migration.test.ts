/**
 * Migration 022 marks every MARK_SPACING-th visit of the histories longer than MARK_SPACING with
 * its rank (history pages at any offset seek to them), and none of the shorter ones.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import t from 'tap';
import { shardMigrations } from '../../migrations/shard/index.js';
import { MARK_SPACING } from '../../src/scans/historyMarks.js';
import { migrate } from '../../src/storage/sqlite.js';

t.test('visits written before 022 are marked every MARK_SPACING ranks after it, in (time, id) order', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'trackd-history-marks-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'shard-0.sqlite');
  const before = shardMigrations.findIndex((m) => m.name === '022_history_marks');
  t.ok(before > 0, 'migration 022 is registered');
  await migrate(file, shardMigrations.slice(0, before));
  const old = new Database(file);
  const visit = old.prepare(
    'INSERT INTO scan_history (asset_id, event_observed_at, id, location_id, last_seen_at, read_count) VALUES (?, ?, ?, 7, ?, 1)',
  );
  const position = old.prepare(
    `INSERT INTO scan_positions (asset_id, org_id, location_id, last_seen_at, visit_id, visit_started_at, visit_read_count, visit_count)
     VALUES (?, 1, 7, 0, 0, 0, 1, ?)`,
  );
  // Asset 1: 2 x MARK_SPACING + 5 visits, ids against time order and pairs at one time (ties by id).
  // Asset 2: exactly MARK_SPACING (no mark). Asset 3: one more (a mark on its last visit).
  const lengths = new Map([
    [1, 2 * MARK_SPACING + 5],
    [2, MARK_SPACING],
    [3, MARK_SPACING + 1],
  ]);
  let id = 1_000_000;
  for (const [asset, n] of lengths) {
    for (let v = 0; v < n; v++) visit.run(asset, 1000 * Math.floor(v / 2), id--, 0);
    position.run(asset, n);
  }
  old.close();

  await migrate(file, shardMigrations);
  const db = new Database(file);
  t.teardown(() => db.close());
  const expected = (asset: number) =>
    (
      db.prepare('SELECT event_observed_at, id FROM scan_history WHERE asset_id = ? ORDER BY event_observed_at, id').raw().all(asset) as [
        number,
        number,
      ][]
    ).flatMap(([at, visitId], rank) => (rank > 0 && rank % MARK_SPACING === 0 ? [[asset, rank, at, visitId]] : []));
  t.same(
    db.prepare('SELECT asset_id, rank, event_observed_at, id FROM scan_history_marks ORDER BY asset_id, rank').raw().all(),
    [...expected(1), ...expected(3)],
    'ranks MARK_SPACING and 2 x MARK_SPACING of asset 1, MARK_SPACING of asset 3, none of asset 2',
  );
  t.equal(expected(1).length, 2, 'asset 1 has two marks');
});
