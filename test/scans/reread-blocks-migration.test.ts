/**
 * Migration 019 turns the re-read log's rows (one per re-read, migration 017) into blocks: runs of
 * consecutive seqs, cut at the fold's cycle_seq so that the next cycle's end deletes what it
 * deleted before. The blocks must hold the same entries, and the writer must load them back.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import t from 'tap';
import { shardMigrations } from '../../migrations/shard/index.js';
import { RereadLog } from '../../src/scans/rereadLog.js';
import { migrate, openDatabase } from '../../src/storage/sqlite.js';
import { REREAD_ENTRIES, registerRereadBlock } from '../helpers/shardTruth.js';

type Row = [seq: number, assetId: number, visitId: number, lastSeenAt: number, readCount: number];

const cases: { name: string; rows: Row[]; cycleSeq: number; blocks: number[] }[] = [
  { name: 'an empty log', rows: [], cycleSeq: 0, blocks: [] },
  {
    name: 'rows on both sides of cycle_seq',
    rows: [5, 6, 7, 8, 9, 10, 11, 12].map((seq): Row => [seq, 100 + (seq % 3), 7_000 + seq, 1_795_000_000_000 + seq * 1000, seq]),
    cycleSeq: 8,
    blocks: [8, 12],
  },
  {
    name: 'a gap in the seqs and cycle_seq at the last row',
    rows: [
      [3, 1, 11, 1_795_000_000_123, 2],
      [4, 2, 12, 1_795_000_000_456, 3],
      [9, 1, 11, 1_795_000_001_000, 4],
      [10, 2_000_000_000, 9_007_199_254_740_000, 1_795_000_002_000, 70_000],
    ],
    cycleSeq: 10,
    blocks: [4, 10],
  },
];

for (const c of cases) {
  t.test(c.name, async (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'trackd-reread-blocks-'));
    t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
    const file = path.join(dir, 'shard-0.sqlite');
    const before = shardMigrations.findIndex((m) => m.name === '019_reread_blocks');
    t.ok(before > 0, 'migration 019 is registered');
    await migrate(file, shardMigrations.slice(0, before));
    const old = new Database(file);
    const insert = old.prepare('INSERT INTO scan_rereads (seq, asset_id, visit_id, last_seen_at, visit_read_count) VALUES (?, ?, ?, ?, ?)');
    for (const row of c.rows) insert.run(...row);
    old.prepare('UPDATE scan_reread_fold SET cursor = 0, cycle_seq = ?, folded_through = 2 WHERE id = 1').run(c.cycleSeq);
    old.close();

    await migrate(file, shardMigrations);
    const db = openDatabase(file);
    t.teardown(() => db.close());
    registerRereadBlock(db);
    t.same(
      db.prepare('SELECT last_seq FROM scan_reread_blocks ORDER BY last_seq').pluck().all(),
      c.blocks,
      'blocks end at the runs and cycle_seq',
    );
    t.same(db.prepare(`${REREAD_ENTRIES} ORDER BY seq`).raw().all(), c.rows, 'the blocks hold the rows, field by field');
    t.equal(
      db.prepare("SELECT count(*) FROM sqlite_master WHERE name = 'scan_rereads'").pluck().get(),
      0,
      'the row-per-re-read table is gone',
    );
    const log = new RereadLog(db);
    t.equal(log.size, new Set(c.rows.map((r) => r[1])).size, 'the writer loads one entry per asset');
    for (const [, assetId] of c.rows) {
      const latest = c.rows.filter((r) => r[1] === assetId).at(-1)!;
      t.same(
        log.over(assetId, latest[2], latest[4] - 1),
        { seq: latest[0], visitId: latest[2], lastSeenAt: latest[3], readCount: latest[4] },
        `asset ${assetId}: its latest entry is laid over`,
      );
    }
  });
}
