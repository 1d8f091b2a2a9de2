import type { Statement } from 'better-sqlite3';
import type { Shard } from '../shards/shard.js';
import type { ShardWriter } from '../shards/writer.js';
import { tagsJsonColumn } from '../masterdata/tags.js';
import { masterColumns, type MasterRow } from '../masterdata/view.js';
import type { Db } from '../storage/sqlite.js';
import { shardState } from '../shards/state.js';

/** A locations row joined with its parent's external_key (kept even when the parent is soft-deleted). */
export interface LocationRow extends MasterRow {
  parent_id: number | null;
  parent_external_key: string | null;
}

/** One node of a subtree walk: enough to order it and to apply the list scope. */
export interface TreeNode {
  id: number;
  parent_id: number | null;
  valid_from: number;
  valid_to: number | null;
}

/** The parent columns of a LocationView, beside masterColumns('l'): the parent by id, whatever its state. */
export const PARENT_COLUMNS = [
  'l.parent_id',
  '(SELECT p.external_key FROM locations p WHERE p.id = l.parent_id AND p.org_id = l.org_id) AS parent_external_key',
];
const ROW_COLUMNS = [...masterColumns('l'), ...PARENT_COLUMNS, tagsJsonColumn('l', 'location_id')].join(', ');
const ROW_FROM = 'locations l';

/**
 * The fixed location queries, prepared once per connection. Tree walks are recursive CTEs that step
 * through the covering locations_tree index downwards and the primary key upwards, so their
 * cost is the size of the answer, not the size of the organization. The recursive steps say CROSS
 * JOIN to pin the queue row as the outer loop: without planner statistics SQLite otherwise prefers
 * the partial live-key index and scans the whole organization once per step.
 */
export class LocationStatements {
  readonly byId: Statement;
  readonly liveById: Statement;
  readonly liveIdByKey: Statement;
  readonly byIds: Statement;
  /** Ancestors of a location with their distance (any order) and liveness; stops at the root. */
  readonly ancestors: Statement;
  /** Live nodes of the subtree under a location (itself excluded), any order. */
  readonly subtree: Statement;
  /** Every node below a location (itself excluded), soft-deleted ones included: what an event filter's subtree holds. */
  readonly subtreeWithDeleted: Statement;
  readonly liveDescendantCount: Statement;
  readonly hasLiveChild: Statement;
  readonly childrenPage: Statement;
  readonly childrenCount: Statement;
  /** True when `ancestor` lies on the parent chain of `node` (node itself included). */
  readonly isInChainOf: Statement;

  constructor(db: Db) {
    this.byId = db.prepare(`SELECT ${ROW_COLUMNS} FROM ${ROW_FROM} WHERE l.org_id = ? AND l.id = ?`);
    this.liveById = db.prepare(`SELECT ${ROW_COLUMNS} FROM ${ROW_FROM} WHERE l.org_id = ? AND l.id = ? AND l.deleted_at IS NULL`);
    this.liveIdByKey = db.prepare('SELECT id FROM locations WHERE org_id = ? AND external_key = ? AND deleted_at IS NULL').pluck();
    // `+l.org_id`: look the ids up by primary key rather than scanning the organization's index.
    this.byIds = db.prepare(`SELECT ${ROW_COLUMNS} FROM ${ROW_FROM} WHERE +l.org_id = ? AND l.id IN (SELECT value FROM json_each(?))`);
    this.ancestors = db.prepare(`
      WITH RECURSIVE up(id, parent_id, valid_from, valid_to, deleted_at, distance) AS (
        SELECT l.id, l.parent_id, l.valid_from, l.valid_to, l.deleted_at, 0 FROM locations l WHERE l.org_id = :org AND l.id = :id
        UNION ALL
        SELECT a.id, a.parent_id, a.valid_from, a.valid_to, a.deleted_at, up.distance + 1
        FROM up CROSS JOIN locations a ON a.id = up.parent_id AND a.org_id = :org
        WHERE up.distance < :limit
      )
      SELECT id, valid_from, valid_to, deleted_at, distance FROM up WHERE distance > 0`);
    this.subtree = db.prepare(`
      WITH RECURSIVE down(id, parent_id, valid_from, valid_to) AS (
        SELECT c.id, c.parent_id, c.valid_from, c.valid_to FROM locations c INDEXED BY locations_tree
        WHERE c.org_id = :org AND c.parent_id = :id AND c.deleted_at IS NULL
        UNION ALL
        SELECT c.id, c.parent_id, c.valid_from, c.valid_to FROM down CROSS JOIN locations c INDEXED BY locations_tree
        ON c.org_id = :org AND c.parent_id = down.id
        WHERE c.deleted_at IS NULL
      )
      SELECT id, parent_id, valid_from, valid_to FROM down`);
    this.subtreeWithDeleted = db
      .prepare(`
      WITH RECURSIVE down(id) AS (
        SELECT c.id FROM locations c INDEXED BY locations_parent WHERE c.org_id = :org AND c.parent_id = :id
        UNION ALL
        SELECT c.id FROM down CROSS JOIN locations c INDEXED BY locations_parent ON c.org_id = :org AND c.parent_id = down.id
      )
      SELECT id FROM down`)
      .pluck();
    this.liveDescendantCount = db
      .prepare(`
      WITH RECURSIVE down(id) AS (
        SELECT c.id FROM locations c INDEXED BY locations_tree WHERE c.org_id = :org AND c.parent_id = :id AND c.deleted_at IS NULL
        UNION ALL
        SELECT c.id FROM down CROSS JOIN locations c INDEXED BY locations_tree ON c.org_id = :org AND c.parent_id = down.id
        WHERE c.deleted_at IS NULL
      )
      SELECT count(*) FROM down`)
      .pluck();
    this.hasLiveChild = db
      .prepare('SELECT EXISTS (SELECT 1 FROM locations WHERE org_id = ? AND parent_id = ? AND deleted_at IS NULL)')
      .pluck();
    this.childrenPage = db.prepare(`
      SELECT ${ROW_COLUMNS} FROM ${ROW_FROM}
      WHERE l.org_id = :org AND l.parent_id = :id AND l.deleted_at IS NULL
        AND l.valid_from <= :now AND (l.valid_to IS NULL OR l.valid_to > :now)
      ORDER BY l.name, l.id LIMIT :limit OFFSET :offset`);
    this.childrenCount = db
      .prepare(`
      SELECT count(*) FROM locations l INDEXED BY locations_tree
      WHERE l.org_id = :org AND l.parent_id = :id AND l.deleted_at IS NULL
        AND l.valid_from <= :now AND (l.valid_to IS NULL OR l.valid_to > :now)`)
      .pluck();
    this.isInChainOf = db
      .prepare(`
      WITH RECURSIVE up(id, parent_id, distance) AS (
        SELECT l.id, l.parent_id, 0 FROM locations l WHERE l.org_id = :org AND l.id = :node
        UNION ALL
        SELECT a.id, a.parent_id, up.distance + 1 FROM up CROSS JOIN locations a ON a.id = up.parent_id AND a.org_id = :org
        WHERE up.id <> :ancestor AND up.distance < :limit
      )
      SELECT EXISTS (SELECT 1 FROM up WHERE id = :ancestor)`)
      .pluck();
  }
}

/**
 * A bound on every upward walk. The write path never lets a cycle form, so this only stops a walk
 * over corrupted data from looping; it is far above any real tree depth.
 */
export const MAX_DEPTH = 1_000_000;

/** Statements on the shard's read-only connection (reads run beside the writer, see Shard). */
export const readStatements = shardState((shard: Shard) => new LocationStatements(shard.reader));

/** Statements on the writer connection, for use inside shard commands only. */
export const writeStatements = shardState((shard: ShardWriter) => new LocationStatements(shard.writer));
