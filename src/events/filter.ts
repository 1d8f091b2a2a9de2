import { readStatements } from '../locations/store.js';
import type { Shard } from '../shards/shard.js';
import type { TableStamp } from '../shards/generations.js';
import type { EventRow } from './envelope.js';

/** What a stream subscription asks for; every part optional (none: every event the key may see). */
export interface EventFilterSpec {
  types?: string[];
  assetIds?: number[];
  /** A location: events at it or below it (moves from or to the subtree, its locations' changes and tags). */
  locationId?: number;
}

interface Touches {
  asset?: { id: number };
  location?: { id: number };
  from?: { id: number } | null;
  to?: { id: number };
  owner_type?: string;
  owner_id?: number;
}

/**
 * A subscription's filter, compiled. The subtree of a location filter is read on the stream's own
 * thread and read again when the locations change (the shard's generation counters say when).
 */
export class EventFilter {
  private readonly types: Set<string> | undefined;
  private readonly assets: Set<number> | undefined;
  private subtree: Set<number> | undefined;
  private stamp: TableStamp | undefined;

  constructor(
    readonly spec: EventFilterSpec,
    private readonly shard: Shard,
    private readonly orgId: number,
  ) {
    this.types = spec.types === undefined || spec.types.length === 0 ? undefined : new Set(spec.types);
    this.assets = spec.assetIds === undefined || spec.assetIds.length === 0 ? undefined : new Set(spec.assetIds);
  }

  matches(row: EventRow): boolean {
    if (this.types !== undefined && !this.types.has(row.type)) return false;
    if (this.assets === undefined && this.spec.locationId === undefined) return true;
    const data = JSON.parse(row.data) as Touches;
    if (this.assets !== undefined) {
      const assetId = data.asset?.id ?? (data.owner_type === 'asset' ? data.owner_id : undefined);
      if (assetId === undefined || !this.assets.has(assetId)) return false;
    }
    if (this.spec.locationId !== undefined) {
      const subtree = this.locations();
      const at = [data.from?.id, data.to?.id, data.location?.id, data.owner_type === 'location' ? data.owner_id : undefined];
      if (!at.some((id) => id !== undefined && subtree.has(id))) return false;
    }
    return true;
  }

  private locations(): Set<number> {
    const generations = this.shard.generations;
    if (this.subtree === undefined || this.stamp === undefined || !generations.tableCurrent('locations', this.stamp)) {
      this.stamp = generations.tableStamp('locations');
      const root = this.spec.locationId!;
      const nodes = readStatements(this.shard).subtree.all({ org: this.orgId, id: root }) as { id: number }[];
      this.subtree = new Set([root, ...nodes.map((n) => n.id)]);
    }
    return this.subtree;
  }
}
