import { parseArgs } from 'node:util';
import { keptListCount } from '../../src/masterdata/liveCounts.js';
import { applyMasterFilters } from '../../src/masterdata/filters.js';
import { orgQuery } from '../../src/masterdata/list.js';
import { Shard } from '../../src/shards/shard.js';
import { openDatabase } from '../../src/storage/sqlite.js';
import { largestShardFile } from '../lib/shardFile.js';

const { values } = parseArgs({ options: { data: { type: 'string' } } });
if (values.data === undefined) throw new Error('--data DIR is required');
const file = largestShardFile(values.data);
const shard = new Shard(0, openDatabase(file, { readonly: true }), undefined as never, undefined as never);
const orgId = shard.reader.prepare('SELECT org_id FROM assets GROUP BY org_id ORDER BY count(*) DESC LIMIT 1').pluck().get() as number;
const now = Date.now();
const median = (run: () => number): { ms: number; count: number } => {
  const times: number[] = [];
  let count = 0;
  for (let i = 0; i < 5; i++) {
    const started = performance.now();
    count = run();
    times.push(performance.now() - started);
  }
  return { ms: Number(times.sort((a, b) => a - b)[2]!.toFixed(3)), count };
};
const result: Record<string, unknown> = { assets: shard.reader.prepare('SELECT count(*) FROM assets').pluck().get() };
for (const filters of [
  { include_deleted: false },
  { include_deleted: false, is_active: true },
  { include_deleted: false, is_active: false },
]) {
  const counted = applyMasterFilters(orgQuery('assets', 'a', orgId), 'a', orgId, filters, now, 'asset_id')
    .count({ n: '*' })
    .toSQL()
    .toNative();
  const rows = median(() => (shard.reader.prepare(counted.sql).get(...(counted.bindings as unknown[])) as { n: number }).n);
  const kept = median(() => keptListCount(shard, 'assets', orgId, filters, now)!);
  if (rows.count !== kept.count) throw new Error(`counts differ for ${JSON.stringify(filters)}: ${rows.count} vs ${kept.count}`);
  result[JSON.stringify(filters)] = {
    total_count: kept.count,
    counted_ms: rows.ms,
    kept_ms: kept.ms,
    ratio: Math.round(rows.ms / kept.ms),
  };
}
process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
