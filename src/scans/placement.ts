import type { AssetPlacement } from '../locations/placement.js';
import { writerStatements } from '../masterdata/keys.js';
import type { ShardWriter } from '../shards/writer.js';
import { reportIndexOf } from './reportIndex.js';

/**
 * The not-deleted positions at a location that the report index leaves out: those outside their
 * validity window at the index's time, found through the two partial indexes that hold them.
 */
const OUTSIDE_VALIDITY_AT = `SELECT 1 FROM scan_positions p INDEXED BY scan_positions_future
    WHERE p.org_id = @org AND p.asset_deleted_at IS NULL AND p.asset_valid_from > @at AND p.location_id = @location
  UNION ALL
  SELECT 1 FROM scan_positions p INDEXED BY scan_positions_expiring
    WHERE p.org_id = @org AND p.asset_deleted_at IS NULL AND p.asset_valid_to IS NOT NULL AND p.asset_valid_to <= @at
      AND p.location_id = @location
  LIMIT 1`;

/**
 * True when a live (not deleted) asset's current location (the report's) is this location: the
 * second check of a location delete (after descendants: a location with live assets placed directly
 * at it is not deleted, 409). Runs on the writer, in the delete's transaction: the report index holds
 * the positions live at its time; those outside their validity window then come from SQLite.
 */
export function hasLiveAssetsAt(shard: ShardWriter, orgId: number, locationId: number): boolean {
  const { found, judgedAt } = reportIndexOf(shard).hasLivePositionAt(orgId, locationId);
  if (found) return true;
  return writerStatements(shard).get(OUTSIDE_VALIDITY_AT).get({ org: orgId, at: judgedAt, location: locationId }) !== undefined;
}

/** The scan side's answers to the location rules. */
export const scanPlacement: AssetPlacement = { hasLiveAssetsAt };
