import type { Shard } from '../shards/shard.js';

interface Entry {
  orgId: number;
  text: string;
}

/**
 * Serialized 200 bodies of a shard's master-data reads by id (routes marked `cacheable`), kept
 * until the shard's next master-data write. Such a body depends on nothing else (no clock, no
 * scans), and every write goes through the shard's mailbox on this thread, so an entry is served
 * only while the version it was read at is current. Bounded by the UTF-16 length of the bodies;
 * the oldest entries go first.
 */
export class ResponseCache {
  private readonly entries = new Map<string, Entry>();
  private version = -1;
  private size = 0;

  constructor(
    private readonly shard: Shard,
    private readonly maxChars: number,
  ) {}

  static of(shard: Shard, maxBytes: number): ResponseCache {
    return shard.local('http.responseCache', (s) => new ResponseCache(s, maxBytes / 2));
  }

  get(orgId: number, path: string): string | undefined {
    this.dropIfStale();
    const entry = this.entries.get(path);
    return entry !== undefined && entry.orgId === orgId ? entry.text : undefined;
  }

  set(orgId: number, path: string, text: string): void {
    if (text.length > this.maxChars) return;
    this.dropIfStale();
    const previous = this.entries.get(path);
    if (previous !== undefined) {
      this.size -= previous.text.length;
      this.entries.delete(path);
    }
    this.entries.set(path, { orgId, text });
    this.size += text.length;
    if (this.size <= this.maxChars) return;
    for (const [oldest, entry] of this.entries) {
      this.entries.delete(oldest);
      this.size -= entry.text.length;
      if (this.size <= this.maxChars) break;
    }
  }

  private dropIfStale(): void {
    if (this.version === this.shard.masterDataVersion) return;
    this.entries.clear();
    this.size = 0;
    this.version = this.shard.masterDataVersion;
  }
}
