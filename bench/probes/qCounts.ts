import { parseArgs } from 'node:util';
import { shardMigrations } from '../../migrations/shard/index.js';
import { addLowerFunction, applyMasterFilters, type TagMatch } from '../../src/masterdata/filters.js';
import { orgQuery, runList } from '../../src/masterdata/list.js';
import { textIndexCount } from '../../src/masterdata/textCounts.js';
import { ShardGenerations } from '../../src/shards/generations.js';
import { Shard } from '../../src/shards/shard.js';
import { DEFAULT_MMAP_BYTES, migrate, openDatabase } from '../../src/storage/sqlite.js';
import { largestShardFile } from '../lib/shardFile.js';

const { values } = parseArgs({
  options: { data: { type: 'string' }, migrate: { type: 'boolean', default: false }, 'mmap-mb': { type: 'string' } },
});
if (values.data === undefined) throw new Error('--data DIR is required');
const file = largestShardFile(values.data);
const result: Record<string, unknown> = {};
if (values.migrate) {
  const started = performance.now();
  await migrate(file, shardMigrations);
  result.migrate_ms = Math.round(performance.now() - started);
}
// --mmap-mb: the reading connection's memory map (READ_MMAP_MB; default openDatabase's 256 MiB).
const mmapMb = values['mmap-mb'] === undefined ? undefined : Number(values['mmap-mb']);
result.mmap_mb = mmapMb ?? DEFAULT_MMAP_BYTES / 1024 / 1024;
const db = openDatabase(file, { readonly: true, mmapBytes: mmapMb === undefined ? undefined : mmapMb * 1024 * 1024 });
const shard = new Shard(0, db, undefined as never, new ShardGenerations());
addLowerFunction(db);
const statements = shard.readerStatements;
const orgId = db.prepare('SELECT org_id FROM assets GROUP BY org_id ORDER BY count(*) DESC LIMIT 1').pluck().get() as number;
result.assets = db.prepare('SELECT count(*) FROM assets WHERE org_id = ?').pluck().get(orgId);
const now = Date.now();

const median = (times: number[]) => Number(times.sort((a, b) => a - b)[Math.floor(times.length / 2)]!.toFixed(3));
const timed = <T>(run: () => T): [number, T] => {
  const started = performance.now();
  const answer = run();
  return [performance.now() - started, answer];
};
const list = (q: string, tagMatch: TagMatch, limit: number) => {
  const base = applyMasterFilters(orgQuery('assets', 'a', orgId), 'a', orgId, { q }, now, 'asset_id', tagMatch);
  return runList<{ id: number }>(statements, base, {
    sort: [{ field: 'external_key', desc: false }],
    columns: { external_key: 'a.external_key' },
    idColumn: 'a.id',
    limit,
    offset: 0,
    select: ['a.id'],
  });
};
const bareScan = db.prepare("SELECT count(*) FROM assets WHERE org_id = ? AND name LIKE ? ESCAPE '\\'").pluck();

// The bench's words (each in about a tenth of the names), rarer stretches of names, keys and tags, no match, non-ASCII, too short.
for (const q of ['pallet', 'steel', 'Tote 1234', 'A0012345', 'E280000000000000000999', 'nothing like it', 'Größe', 'ab']) {
  const times: Record<string, number[]> = {
    before: [],
    after: [],
    index_count: [],
    index_count_active: [],
    page_before: [],
    page_after: [],
    bare_scan: [],
  };
  let totals: number[] = [];
  let answered = false;
  for (let i = 0; i < 5; i++) {
    const [before, b] = timed(() => list(q, 'set', 1));
    const [after, a] = timed(() => list(q, 'text', 1));
    // The text index count (textCounts.ts): undefined where it does not answer (the row-by-row count then).
    const [indexCount, ic] = timed(() => textIndexCount(shard, 'assets', orgId, { q }, now));
    const [indexCountActive] = timed(() => textIndexCount(shard, 'assets', orgId, { q, is_active: true }, now));
    if (ic !== undefined && ic !== a.total) throw new Error(`the index count differs for q=${q}: ${ic} against ${a.total}`);
    answered = ic !== undefined;
    const [pageBefore, pb] = timed(() => list(q, 'set', 20));
    const [pageAfter, pa] = timed(() => list(q, 'text', 20));
    const [bare] = timed(() => bareScan.get(orgId, `%${q}%`));
    times.before!.push(before);
    times.after!.push(after);
    times.index_count!.push(indexCount);
    times.index_count_active!.push(indexCountActive);
    times.page_before!.push(pageBefore);
    times.page_after!.push(pageAfter);
    times.bare_scan!.push(bare);
    totals = [b.total, a.total];
    if (b.total !== a.total || JSON.stringify(pb.rows) !== JSON.stringify(pa.rows)) throw new Error(`answers differ for q=${q}`);
  }
  const m = Object.fromEntries(Object.entries(times).map(([k, v]) => [`${k}_ms`, median(v)]));
  result[q] = {
    total_count: totals[0],
    ...m,
    count_speedup: Number(((m.before_ms as number) / (m.after_ms as number)).toFixed(1)),
    index_count_answered: answered,
    index_count_speedup: answered ? Number(((m.after_ms as number) / (m.index_count_ms as number)).toFixed(1)) : null,
    after_vs_bare_scan: Number(((m.after_ms as number) / (m.bare_scan_ms as number)).toFixed(3)),
  };
}
process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
