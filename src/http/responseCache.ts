import type { RowEffects, Shard } from '../shards/shard.js';

interface Entry {
  orgId: number;
  text: string;
}

/**
 * Serialized 200 bodies of a shard's master-data reads by id (routes marked `cacheable`), each kept
 * until a write changes its row. Such a body depends on its row alone (no clock, no scans), and
 * every write goes through the shard's mailbox on this thread and reports what it changed in the
 * same turn as its commit: a write naming rows evicts those, any other master-data write evicts
 * everything. Bounded by the UTF-16 length of the bodies; the oldest entries go first.
 */
export class ResponseCache {
  private readonly entries = new Map<string, Entry>();
  private size = 0;

  private constructor(private readonly maxChars: number) {}

  static of(shard: Shard, maxBytes: number): ResponseCache {
    return shard.local('http.responseCache', (s) => {
      const cache = new ResponseCache(maxBytes / 2);
      s.onMasterDataWrite((effects) => cache.evict(effects));
      return cache;
    });
  }

  get(orgId: number, table: string, id: number): string | undefined {
    const entry = this.entries.get(`${table} ${id}`);
    return entry !== undefined && entry.orgId === orgId ? entry.text : undefined;
  }

  set(orgId: number, table: string, id: number, text: string): void {
    if (text.length > this.maxChars) return;
    const key = `${table} ${id}`;
    this.delete(key);
    this.entries.set(key, { orgId, text });
    this.size += text.length;
    for (const oldest of this.entries.keys()) {
      if (this.size <= this.maxChars) break;
      this.delete(oldest);
    }
  }

  private evict(effects: 'any' | RowEffects): void {
    if (effects === 'any') {
      this.entries.clear();
      this.size = 0;
    } else {
      for (const id of effects.ids) this.delete(`${effects.table} ${id}`);
    }
  }

  private delete(key: string): void {
    const entry = this.entries.get(key);
    if (entry === undefined) return;
    this.entries.delete(key);
    this.size -= entry.text.length;
  }
}
