import { type LocationStatements, MAX_DEPTH, readStatements } from '../locations/store.js';
import type { TableStamp } from '../shards/generations.js';
import type { Shard } from '../shards/shard.js';

/**
 * What a subscriber (a stream subscription, a webhook endpoint) asks for; every part optional (none:
 * every event its key may see). The one place where events are matched against filters.
 */
export interface EventFilterSpec {
  types?: readonly string[];
  assetIds?: readonly number[];
  /**
   * A location: events at it or below it (moves from or to the subtree, its locations' changes, deletions
   * and tags). The subtree counts its soft-deleted locations, so a location's deletion, and the events
   * about it before, match whenever they are read (live, or later from a cursor).
   */
  locationId?: number;
}

/** Whether location `locationId` lies in the subtree of `root` (itself included). */
export type InSubtree = (locationId: number, root: number) => boolean;

/** The part of an event a filter looks at (an `events` row, or any event with its payload as JSON text). */
export interface FilterableEvent {
  type: string;
  data: string;
}

/** The ids a payload names, whatever its type (asset.*, location.*, tag.*). */
interface Touches {
  asset?: { id: number };
  location?: { id: number };
  from?: { id: number } | null;
  to?: { id: number };
  owner_type?: string;
  owner_id?: number;
}

/** A filter compiled once: `matches(event)` per event; the subtree is asked of `inSubtree` when needed. */
export interface EventFilter {
  readonly spec: EventFilterSpec;
  matches(event: FilterableEvent): boolean;
}

export function compileFilter(spec: EventFilterSpec, inSubtree: InSubtree): EventFilter {
  const types = spec.types === undefined || spec.types.length === 0 ? undefined : new Set(spec.types);
  const assets = spec.assetIds === undefined || spec.assetIds.length === 0 ? undefined : new Set(spec.assetIds);
  const root = spec.locationId;
  const everything = assets === undefined && root === undefined;
  return {
    spec,
    matches(event) {
      if (types !== undefined && !types.has(event.type)) return false;
      if (everything) return true;
      const data = JSON.parse(event.data) as Touches;
      const kind = event.type.slice(0, event.type.indexOf('.'));
      if (assets !== undefined) {
        const assetId = kind === 'asset' ? data.asset?.id : data.owner_type === 'asset' ? data.owner_id : undefined;
        if (assetId === undefined || !assets.has(assetId)) return false;
      }
      if (root !== undefined) {
        const at =
          kind === 'asset'
            ? [data.from?.id, data.to?.id]
            : kind === 'location'
              ? [data.location?.id]
              : [data.owner_type === 'location' ? data.owner_id : undefined];
        if (!at.some((id) => id !== undefined && inSubtree(id, root))) return false;
      }
      return true;
    },
  };
}

/**
 * Streams: the subtree as the tree stands now, soft-deleted locations included (as `chainSubtrees`
 * sees it), read on a thread's read connection of the shard, each kept until the locations change
 * (the shard's generation counters say when).
 */
export function shardSubtrees(shard: Shard, orgId: number): InSubtree {
  const cached = new Map<number, { stamp: TableStamp; ids: ReadonlySet<number> }>();
  const subtreeOf = (root: number): ReadonlySet<number> => {
    const generations = shard.generations;
    const hit = cached.get(root);
    if (hit !== undefined && generations.tableCurrent('locations', hit.stamp)) return hit.ids;
    const stamp = generations.tableStamp('locations');
    const below = readStatements(shard).subtreeWithDeleted.all({ org: orgId, id: root }) as number[];
    const ids = new Set([root, ...below]);
    cached.set(root, { stamp, ids });
    return ids;
  };
  return (locationId, root) => subtreeOf(root).has(locationId);
}

/**
 * Webhooks: the location's parent chain, deleted locations included, by `statements` on a connection
 * of the dispatcher's own (which has no generation counters to keep a subtree by).
 */
export function chainSubtrees(statements: LocationStatements, orgId: number): InSubtree {
  return (locationId, root) => statements.isInChainOf.get({ org: orgId, node: locationId, ancestor: root, limit: MAX_DEPTH }) === 1;
}
