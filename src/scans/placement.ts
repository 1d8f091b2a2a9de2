import type { AssetPlacement } from '../locations/placement.js';
import type { Db } from '../storage/sqlite.js';

/**
 * True when a live asset's current location (the report's) is this location: the second check of a
 * location delete (after descendants: a location with live assets placed directly at it is not
 * deleted, 409). Walks scan_positions_location; runs on the writer, in the delete's transaction.
 */
export function hasLiveAssetsAt(db: Db, orgId: number, locationId: number): boolean {
  const row = db
    .prepare(
      'SELECT 1 FROM scan_positions p JOIN assets a ON a.id = p.asset_id WHERE p.org_id = ? AND p.location_id = ? AND a.deleted_at IS NULL LIMIT 1',
    )
    .get(orgId, locationId);
  return row !== undefined;
}

/** The scan side's answers to the location rules. */
export const scanPlacement: AssetPlacement = { hasLiveAssetsAt };
