import type { Db } from '../storage/sqlite.js';
import type { EventRow } from '../events/envelope.js';
import type { WebhookFilters } from './schemas.js';

interface Ref {
  id: number;
}
interface EventData {
  asset?: Ref;
  location?: Ref;
  from?: Ref | null;
  to?: Ref;
  owner_type?: 'asset' | 'location';
  owner_id?: number;
}

/** Whether `locationId` lies in the subtree of `root` (itself included), by the parent chain on `db`. */
export type InSubtree = (locationId: number, root: number) => boolean;

export function subtreeCheck(db: Db): InSubtree {
  const parent = db.prepare('SELECT parent_id FROM locations WHERE id = ?').pluck();
  return (locationId, root) => {
    const seen = new Set<number>();
    for (let id: number | null = locationId; id !== null && !seen.has(id); id = parent.get(id) as number | null) {
      if (id === root) return true;
      seen.add(id);
    }
    return false;
  };
}

/** The assets and locations an event is about (a move: its asset, and the locations it left and reached). */
function subjects(type: string, data: EventData): { assets: number[]; locations: number[] } {
  if (type === 'asset.moved') return { assets: [data.asset!.id], locations: [data.to!.id, ...(data.from ? [data.from.id] : [])] };
  if (type.startsWith('asset.')) return { assets: [data.asset!.id], locations: [] };
  if (type.startsWith('location.')) return { assets: [], locations: [data.location!.id] };
  return data.owner_type === 'asset' ? { assets: [data.owner_id!], locations: [] } : { assets: [], locations: [data.owner_id!] };
}

/**
 * Whether an event passes an endpoint's filters: its type listed; with `asset_ids`, about one of
 * those assets; with `location_id`, about a location in that subtree (a move from or to it). Both
 * filters given: both must pass.
 */
export function matches(types: ReadonlySet<string>, filters: WebhookFilters, row: EventRow, inSubtree: InSubtree): boolean {
  if (!types.has(row.type)) return false;
  if (filters.asset_ids === undefined && filters.location_id === undefined) return true;
  const about = subjects(row.type, JSON.parse(row.data) as EventData);
  if (filters.asset_ids !== undefined && !about.assets.some((a) => filters.asset_ids!.includes(a))) return false;
  const root = filters.location_id;
  if (root !== undefined && !about.locations.some((l) => inSubtree(l, root))) return false;
  return true;
}
