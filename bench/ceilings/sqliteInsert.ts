/**
 * Raw SQLite insert ceiling: history rows (the scan_history table of the shard migrations, same
 * primary key, same pragmas) inserted with one prepared statement in transactions, in a fresh file,
 * with nothing else. `node sqliteInsert.js SPEC.json` prints {rate, rows}.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { shardMigrations } from '../../migrations/shard/index.js';
import { migrate, openDatabase } from '../../src/storage/sqlite.js';
import { specArg } from '../lib/args.js';

interface Spec {
  rows: number;
  assets: number;
  locations: number;
  rowsPerTransaction: number;
}

const spec = JSON.parse(fs.readFileSync(specArg(), 'utf8')) as Spec;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tdbench-sqlite-'));
try {
  const file = path.join(dir, 'shard.sqlite');
  await migrate(file, shardMigrations);
  const db = openDatabase(file);
  const insert = db.prepare(
    'INSERT INTO scan_history (asset_id, event_observed_at, id, location_id, last_seen_at, read_count) VALUES (?, ?, ?, ?, ?, ?)',
  );
  // The rows are prepared before timing: only the inserts and commits are measured.
  const assets = Int32Array.from({ length: spec.rows }, () => 1 + Math.floor(Math.random() * spec.assets));
  const base = Date.now();
  const started = performance.now();
  for (let from = 0; from < spec.rows; from += spec.rowsPerTransaction) {
    db.transaction(() => {
      for (let i = from; i < Math.min(spec.rows, from + spec.rowsPerTransaction); i++) {
        const at = base + i;
        insert.run(assets[i], at, i + 1, 1 + (i % spec.locations), at, 1);
      }
    })();
  }
  const seconds = (performance.now() - started) / 1000;
  db.close();
  process.stdout.write(`${JSON.stringify({ rows: spec.rows, rate: Math.round(spec.rows / seconds) })}\n`);
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
