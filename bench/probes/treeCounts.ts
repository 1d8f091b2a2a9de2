/**
 * The console tree's subtree counts at the large bench dataset's size (1,000,000 assets, 10,000
 * locations: a 24-deep chain and a 10-ary tree whose root holds every asset, all placed at its
 * leaves), in process: the report's SQL over the subtree's location ids (how the tree counted
 * before) against the counts the shard actor's report index keeps per location (one tree page,
 * cold: its first page builds them, and warm), and what a move adds (one walk up its location's
 * ancestors). Ceiling, same run: a bare count(*) of the org's positions. One JSON document, ms.
 *
 *   node dist/bench/probes/treeCounts.js [--assets 1000000]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadMasterData } from '../dataset/masterData.js';
import { SIZES } from '../dataset/sizes.js';
import { reportTotal } from '../../src/console/treeCounts.js';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { readStatements, type TreeNode } from '../../src/locations/store.js';
import { ReportIndex } from '../../src/scans/reportIndex.js';
import { RereadLog } from '../../src/scans/rereadLog.js';
import { SubtreeTotals } from '../../src/scans/subtreeTotals.js';
import { Shard } from '../../src/shards/shard.js';
import { openDatabase } from '../../src/storage/sqlite.js';

const { values } = parseArgs({ options: { assets: { type: 'string' } } });
const size = { ...SIZES.large, assets: Number(values.assets ?? SIZES.large.assets) };
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tree-counts-'));
fs.mkdirSync(path.join(dir, 'shards'));
const control = await ControlPlane.open(dir);
const org = await control.createOrg('Probe', 1);
control.close();
const info = await loadMasterData(dir, org.id, 'large', size);
const writer = openDatabase(info.shardFile);
const leaves = writer
  .prepare('SELECT id FROM locations l WHERE org_id = ? AND NOT EXISTS (SELECT 1 FROM locations c WHERE c.parent_id = l.id) AND id >= ?')
  .pluck()
  .all(org.id, info.deepBranch.at(-1)! + 1) as number[];
const now = Date.now();
const place =
  writer.prepare(`INSERT INTO scan_positions (asset_id, org_id, location_id, last_seen_at, visit_id, visit_started_at, visit_read_count,
  asset_valid_from, asset_valid_to, asset_deleted_at)
  SELECT id, org_id, ?, ?, id, ?, 1, valid_from, valid_to, deleted_at FROM assets WHERE id = ?`);
writer.transaction(() => {
  for (let i = 0; i < info.assets.count; i++) {
    const seen = now - 3_600_000 + i;
    place.run(leaves[i % leaves.length], seen, seen, info.assets.first + i);
  }
})();
const root = info.subtreeRoots[0]!;
const shard = new Shard(0, openDatabase(info.shardFile, { readonly: true }), undefined as never, undefined as never);
const rootsPage = shard.reader
  .prepare('SELECT id FROM locations WHERE org_id = ? AND parent_id IS NULL AND deleted_at IS NULL ORDER BY name, id LIMIT 50')
  .pluck()
  .all(org.id) as number[];

const median = (runs: number, run: () => unknown): number => {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    run();
    times.push(performance.now() - started);
  }
  return Number(times.sort((a, b) => a - b)[Math.floor(runs / 2)]!.toFixed(3));
};
const medianAsync = async (runs: number, run: () => Promise<unknown>): Promise<number> => {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    await run();
    times.push(performance.now() - started);
  }
  return Number(times.sort((a, b) => a - b)[Math.floor(runs / 2)]!.toFixed(3));
};

const ceiling = median(3, () => shard.reader.prepare('SELECT count(*) FROM scan_positions WHERE org_id = ?').pluck().get(org.id));
const tree = readStatements(shard);
let sqlCount = 0;
const sql = await medianAsync(3, async () => {
  const below = (tree.subtree.all({ org: org.id, id: root }) as TreeNode[]).map((n) => n.id);
  sqlCount = await reportTotal(shard, org.id, [root, ...below], now);
});

let started = performance.now();
const index = new ReportIndex(writer, now, new RereadLog(writer));
const indexBuild = performance.now() - started;
started = performance.now();
const cold = index.treeCounts(org.id, rootsPage, now)!;
const coldMs = performance.now() - started;
const warm = median(101, () => index.treeCounts(org.id, rootsPage, now));
const kept = cold.subtree[rootsPage.indexOf(root)]!;
if (kept !== sqlCount || kept !== info.assets.count)
  throw new Error(`counts differ: kept ${kept}, SQL ${sqlCount}, assets ${info.assets.count}`);
// A move's share: its location's walk up the tree, out of one leaf and into another (the same class, links in memory).
const links = new Map(
  (writer.prepare('SELECT id, parent_id FROM locations WHERE org_id = ?').all(org.id) as { id: number; parent_id: number | null }[]).map(
    (r) => [r.id, { parent: r.parent_id, live: true }],
  ),
);
const walk = new SubtreeTotals((id) => links.get(id));
const moveUs = median(11, () => {
  for (let i = 0; i < 10_000; i++) {
    walk.add(leaves[i % leaves.length]!, -1);
    walk.add(leaves[(i + 1) % leaves.length]!, 1);
  }
});

process.stdout.write(
  `${JSON.stringify(
    {
      assets: info.assets.count,
      locations: size.locations,
      roots_page: rootsPage.length,
      ceiling_count_star_ms: ceiling,
      before_sql_root_subtree_ms: sql,
      before_ratio_to_ceiling: Number((sql / ceiling).toFixed(2)),
      index_build_ms: Math.round(indexBuild),
      after_page_cold_ms: Number(coldMs.toFixed(3)),
      after_page_warm_ms: warm,
      after_ratio_to_ceiling: Number((warm / ceiling).toFixed(4)),
      speedup_warm: Math.round(sql / warm),
      move_walk_us: Number(((moveUs * 1000) / 10_000).toFixed(3)),
      subtree_count: kept,
    },
    null,
    2,
  )}\n`,
);
fs.rmSync(dir, { recursive: true, force: true });
