import type { Shard } from '../shards/shard.js';
import type { KeyedTable } from './keys.js';

const MAX_ENTRIES = 10_000;

/**
 * total_count of master-data lists, per filter set, kept while it cannot change: until the shard's
 * next master-data write, and until the next validity boundary (a live row's valid_from or valid_to
 * after the time of the first count), where the currently-effective rule could let a row in or out.
 * Counting is most of a list request (a walk of every matching row), and it repeats for every page.
 */
export class CountCache {
  private readonly counts = new Map<string, number>();
  private version = -1;
  private validFrom = 0;
  private validUntil = 0;

  private constructor(
    private readonly shard: Shard,
    private readonly table: KeyedTable,
  ) {}

  static of(shard: Shard, table: KeyedTable): CountCache {
    return shard.local(`masterdata.countCache.${table}`, (s) => new CountCache(s, table));
  }

  count(orgId: number, filters: Record<string, unknown>, now: number, compute: () => number): number {
    // Soft-deleted rows' validity boundaries are not tracked (see nextBoundary): count those lists each time.
    if (filters.include_deleted === true) return compute();
    if (this.version !== this.shard.masterDataVersion || now >= this.validUntil || now < this.validFrom) {
      this.counts.clear();
      this.version = this.shard.masterDataVersion;
      this.validFrom = now;
      this.validUntil = this.nextBoundary(now);
    }
    const key = `${orgId} ${JSON.stringify(filters)}`;
    let total = this.counts.get(key);
    if (total === undefined) {
      total = compute();
      if (this.counts.size >= MAX_ENTRIES) this.counts.clear();
      this.counts.set(key, total);
    }
    return total;
  }

  /** The first time after `now` at which a live row of any org on this shard becomes effective or stops being so. */
  private nextBoundary(now: number): number {
    const statements = this.shard.readerStatements;
    const from = statements.get(`SELECT min(valid_from) FROM ${this.table} WHERE deleted_at IS NULL AND valid_from > ?`).pluck().get(now) as number | null;
    const to = statements.get(`SELECT min(valid_to) FROM ${this.table} WHERE deleted_at IS NULL AND valid_to > ?`).pluck().get(now) as number | null;
    return Math.min(from ?? Infinity, to ?? Infinity);
  }
}
