/**
 * History of one asset with many visits: what a page costs at offset 0 and at deep offsets, through
 * the real query (assetHistory over a shard file built by the shard migrations), in-process. One
 * JSON line: microseconds per page (limit 50, default and ascending sort) at each offset, and per
 * total_count of a time window (from/to) two ways in the same run: counting the window's visits
 * (the plain count, as before) and `windowCount` (from the rank marks, shard migration 022).
 *
 *   node dist/bench/probes/historyDepth.js [--visits 100000]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { shardMigrations } from '../../migrations/shard/index.js';
import { MARKS_FROM_HISTORY } from '../../src/scans/historyMarks.js';
import { assetHistory, windowCount } from '../../src/scans/historyQuery.js';
import { Shard } from '../../src/shards/shard.js';
import { migrate, openDatabase } from '../../src/storage/sqlite.js';

const { values } = parseArgs({ options: { visits: { type: 'string' } } });
const VISITS = Number(values.visits ?? 100_000);
const ASSET = 7;
const LIMIT = 50;
const BASE = Date.UTC(2026, 0, 1);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'history-depth-'));
const file = path.join(dir, 'shard.sqlite');
await migrate(file, shardMigrations);
const writer = openDatabase(file);
const insert = writer.prepare(
  'INSERT INTO scan_history (asset_id, event_observed_at, id, location_id, last_seen_at, read_count) VALUES (?, ?, ?, ?, ?, ?)',
);
// The position the scan writer keeps beside the visits (the open one, and the count of them).
const position = writer.prepare(`INSERT INTO scan_positions (asset_id, org_id, location_id, last_seen_at, visit_id, visit_started_at,
  visit_read_count, visit_count) VALUES (?, 1, ?, ?, ?, ?, 3, ?)`);
writer.transaction(() => {
  // Neighbours on both sides, so that the asset's range sits inside a bigger table.
  for (const asset of [ASSET - 1, ASSET, ASSET + 1]) {
    for (let v = 0; v < VISITS; v++) insert.run(asset, BASE + v * 60_000, asset * VISITS + v, 1 + (v % 10), BASE + v * 60_000 + 30_000, 3);
    const last = VISITS - 1;
    position.run(asset, 1 + (last % 10), BASE + last * 60_000 + 30_000, asset * VISITS + last, BASE + last * 60_000, VISITS);
  }
})();
// The rank marks the scan writer keeps as it inserts visits (shard migration 022 builds them the same way).
writer.exec(MARKS_FROM_HISTORY);
writer.close();

const shard = new Shard(0, openDatabase(file, { readonly: true }), undefined as never, undefined as never);
const now = BASE + VISITS * 60_000 * 2;
const perPage = (offset: number, desc: boolean) => {
  const args = { sort: [{ field: 'event_observed_at', desc }], limit: LIMIT, offset };
  assetHistory(shard, ASSET, args, now);
  const rounds = 50;
  const started = performance.now();
  for (let i = 0; i < rounds; i++) {
    const page = assetHistory(shard, ASSET, args, now);
    if (page.total_count !== VISITS || page.data.length !== Math.min(LIMIT, VISITS - offset)) throw new Error(`bad page at ${offset}`);
  }
  return Math.round(((performance.now() - started) * 1000) / rounds);
};
const at = (share: number) => BASE + Math.floor(VISITS * share) * 60_000;
const windows: [string, number | undefined, number | undefined][] = [
  ['since_10pct', at(0.1), undefined],
  ['since_50pct', at(0.5), undefined],
  ['since_90pct', at(0.9), undefined],
  ['from_5pct_to_95pct', at(0.05), at(0.95)],
  ['until_20pct', undefined, at(0.2)],
];
const plainCount = shard.readerStatements.get(
  'SELECT count(*) FROM scan_history WHERE asset_id = ? AND event_observed_at >= ? AND event_observed_at <= ?',
);
const timed = (count: () => number) => {
  const rounds = 20;
  const answer = count();
  const started = performance.now();
  for (let i = 0; i < rounds; i++) if (count() !== answer) throw new Error('unstable count');
  return { answer, us: Math.round(((performance.now() - started) * 1000) / rounds) };
};
const perWindow = (from: number | undefined, to: number | undefined) => {
  const plain = timed(() => plainCount.pluck().get(ASSET, from ?? 0, to ?? Number.MAX_SAFE_INTEGER) as number);
  const kept = timed(() => windowCount(shard, ASSET, VISITS, from, to));
  if (plain.answer !== kept.answer) throw new Error(`window count ${kept.answer} != ${plain.answer}`);
  return { visits: plain.answer, plain_us: plain.us, kept_us: kept.us, ratio: Math.round((plain.us / Math.max(1, kept.us)) * 10) / 10 };
};
const offsets = [...new Set([0, Math.min(1_000, VISITS - LIMIT), Math.floor(VISITS / 4), Math.floor(VISITS / 2), VISITS - LIMIT])];
console.log(
  JSON.stringify({
    visits: VISITS,
    page_us_desc: Object.fromEntries(offsets.map((o) => [o, perPage(o, true)])),
    page_us_asc: Object.fromEntries(offsets.map((o) => [o, perPage(o, false)])),
    window_count_us: Object.fromEntries(windows.map(([name, from, to]) => [name, perWindow(from, to)])),
  }),
);
fs.rmSync(dir, { recursive: true, force: true });
