/**
 * Report paging at any offset: the shard's rank index (src/scans/rankIndex.ts) against the walk
 * SQLite does today (OFFSET over the covering index on (org_id, last_seen_at, asset_id)), same
 * entries, same machine, same run. Prints one JSON line.
 *
 *   node dist/bench/probes/rankIndex.js [--entries 1000000] [--pages 200] [--block 1024]
 */
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { RankIndex } from '../../src/scans/rankIndex.js';

const { values } = parseArgs({ options: { entries: { type: 'string' }, pages: { type: 'string' }, block: { type: 'string' } } });
const N = Number(values.entries ?? 1_000_000);
const PAGES = Number(values.pages ?? 200);
const LIMIT = 50;
const BASE = Date.UTC(2026, 0, 1);
const seenAt = (i: number) => BASE + ((i * 7919) % N) * 1000;

const heapBefore = process.memoryUsage().heapUsed + process.memoryUsage().arrayBuffers;
let started = performance.now();
const index = new RankIndex(false, Number(values.block ?? 1024));
for (let id = 1; id <= N; id++) index.insert(seenAt(id), id);
const buildMs = performance.now() - started;
const heapAfter = process.memoryUsage().heapUsed + process.memoryUsage().arrayBuffers;

// A re-read moves an asset to the front: remove at its old key, insert at the newest.
const moves = 200_000;
const keys = new Float64Array(N + 1);
for (let id = 1; id <= N; id++) keys[id] = seenAt(id);
started = performance.now();
for (let m = 0; m < moves; m++) {
  const id = 1 + ((m * 104_729) % N);
  index.remove(keys[id]!, id);
  keys[id] = BASE + N * 1000 + m;
  index.insert(keys[id]!, id);
}
const moveNs = ((performance.now() - started) * 1e6) / moves;

const offsets = Array.from({ length: PAGES }, (_, i) => Math.floor(((i + 0.5) / PAGES) * (N - LIMIT)));
started = performance.now();
let checksum = 0;
for (const offset of offsets) checksum += index.page(offset, LIMIT).length;
const indexPageUs = ((performance.now() - started) * 1000) / PAGES;

const db = new Database(':memory:');
db.exec('CREATE TABLE p (org_id INTEGER, asset_id INTEGER PRIMARY KEY, last_seen_at INTEGER)');
db.exec('CREATE INDEX p_seen ON p (org_id, last_seen_at, asset_id)');
const insert = db.prepare('INSERT INTO p VALUES (1, ?, ?)');
db.transaction(() => {
  for (let id = 1; id <= N; id++) insert.run(id, keys[id]);
})();
const pageSql = db.prepare('SELECT asset_id FROM p WHERE org_id = 1 ORDER BY last_seen_at DESC, asset_id DESC LIMIT ? OFFSET ?').pluck();
// The same pages must come out of both: the probe measures equal work.
for (const offset of offsets.slice(0, 20)) {
  const a = index.page(offset, LIMIT).join();
  const b = (pageSql.all(LIMIT, offset) as number[]).join();
  if (a !== b) throw new Error(`rank index and SQLite disagree at offset ${offset}`);
}
const sqlPages = Math.min(PAGES, 40);
started = performance.now();
for (const offset of offsets.slice(0, sqlPages)) checksum += (pageSql.all(LIMIT, offset) as number[]).length;
const sqlitePageUs = ((performance.now() - started) * 1000) / sqlPages;

console.log(
  JSON.stringify({
    entries: N,
    build_ms: Math.round(buildMs),
    bytes_per_entry: Math.round((index.bytes() / N) * 10) / 10,
    heap_delta_mb: Math.round((heapAfter - heapBefore) / 1e5) / 10,
    move_ns: Math.round(moveNs),
    page_us_index: Math.round(indexPageUs * 10) / 10,
    page_us_sqlite_offset: Math.round(sqlitePageUs),
    speedup: Math.round(sqlitePageUs / indexPageUs),
    checksum,
  }),
);
