import type { RequestContext } from '../http/route.js';
import { readStatements } from '../locations/store.js';
import type { TreeNode } from '../locations/store.js';
import type { Page } from '../masterdata/list.js';
import { lastSeq } from '../events/read.js';
import { treeCountsCommand } from '../scans/reportIndex.js';
import { assetLocationsReport, indexedReport, type ReportFilters } from '../scans/reportQuery.js';
import type { Shard } from '../shards/shard.js';

export interface TreeItem {
  id: number;
  external_key: string;
  name: string;
  has_children: boolean;
  /** Assets whose current location is this one (the report filtered by it). */
  asset_count: number;
  /** Assets at this location or anywhere below it. */
  subtree_asset_count: number;
}

const EFFECTIVE = 'l.valid_from <= :now AND (l.valid_to IS NULL OR l.valid_to > :now)';
const CHILDREN = `
  SELECT l.id, l.external_key, l.name,
    EXISTS (SELECT 1 FROM locations c WHERE c.org_id = l.org_id AND c.parent_id = l.id AND c.deleted_at IS NULL) AS has_children
  FROM locations l
  WHERE l.org_id = :org AND l.parent_id IS :parent AND l.deleted_at IS NULL AND ${EFFECTIVE}
  ORDER BY l.name, l.id LIMIT :limit OFFSET :offset`;
const CHILDREN_COUNT = `SELECT count(*) FROM locations l
  WHERE l.org_id = :org AND l.parent_id IS :parent AND l.deleted_at IS NULL AND ${EFFECTIVE}`;

/** Location ids per report call: well under SQLite's limit on bound parameters. */
const IDS_PER_CALL = 10_000;

/**
 * How many assets the report places at any of `ids`: the report's own query and rules (its rank
 * index for one location, its SQL for several), so a count always equals the list it heads.
 * Each asset has one current location, so the totals of disjoint id sets add up. The SQL path is
 * asked for a page past any end: it then counts (the positions the report index names at the
 * locations, looked up by id) and sorts nothing.
 */
export async function reportTotal(shard: Shard, orgId: number, ids: number[], now: number): Promise<number> {
  const sort = [{ field: 'asset_last_seen', desc: true }];
  if (ids.length === 1) {
    const indexed = await indexedReport(shard, orgId, { location_id: ids, sort, limit: 1, offset: 0 }, now);
    if (indexed !== undefined) return indexed.total_count;
  }
  let total = 0;
  for (let i = 0; i < ids.length; i += IDS_PER_CALL) {
    const filters: ReportFilters = { location_id: ids.slice(i, i + IDS_PER_CALL), sort, limit: 1, offset: Number.MAX_SAFE_INTEGER };
    total += (await assetLocationsReport(shard, orgId, filters, now)).total_count;
  }
  return total;
}

/** A page of the tree, with the event sequence its counts reflect. */
export interface TreePage extends Page<TreeItem> {
  /**
   * The organization's event sequence the counts reflect: every event up to it, and (when the
   * shard's report index answers, always but for a clock set back) none after, so a live feed
   * that applies only the moves after it counts each move once.
   */
  as_of_seq: number;
}

/** One page of children (by name, then id) of a location, or of the roots, each with its own and its subtree's asset count. */
export async function treeChildren(ctx: RequestContext): Promise<TreePage> {
  const { shard, now } = ctx;
  const org = ctx.principal.orgId;
  const parent = (ctx.query.parent_id as number | undefined) ?? null;
  const limit = ctx.query.limit as number;
  const offset = ctx.query.offset as number;
  const rows = shard.readerStatements.get(CHILDREN).all({ org, parent, now, limit, offset }) as Omit<
    TreeItem,
    'asset_count' | 'subtree_asset_count'
  >[];
  const total = shard.readerStatements.get(CHILDREN_COUNT).pluck().get({ org, parent, now }) as number;
  const page = { limit, offset, total_count: total };
  const kept = await shard.send(treeCountsCommand, { orgId: org, ids: rows.map((r) => r.id) });
  if (kept !== undefined) {
    const data = rows.map((row, i) => ({
      ...row,
      has_children: Boolean(row.has_children),
      asset_count: kept.here[i]!,
      subtree_asset_count: kept.subtree[i]!,
    }));
    return { data, ...page, as_of_seq: kept.asOfSeq };
  }
  // Read before the counts, like the report's: every event up to it is reflected (a later one may be too).
  const asOfSeq = lastSeq(shard, org);
  const tree = readStatements(shard);
  const data: TreeItem[] = [];
  for (const row of rows) {
    const own = await reportTotal(shard, org, [row.id], now);
    const below = row.has_children ? (tree.subtree.all({ org, id: row.id }) as TreeNode[]).map((n) => n.id) : [];
    const inSubtree = below.length === 0 ? own : own + (await reportTotal(shard, org, below, now));
    data.push({ ...row, has_children: Boolean(row.has_children), asset_count: own, subtree_asset_count: inSubtree });
  }
  return { data, ...page, as_of_seq: asOfSeq };
}
