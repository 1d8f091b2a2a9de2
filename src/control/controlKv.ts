import type { NatsConnection } from '@nats-io/transport-node';
import { LeaseBucket, RevisionMoved } from '../cluster/leaseBucket.js';
import { replaceSigningKey, storedSigningKey, type StoredKey } from '../auth/signingKey.js';
import type { ApiKeyRow, OrgRow } from './controlPlane.js';

/** The control plane's NATS KV bucket in cluster mode (docs/cluster.md, "The control plane in KV"). */
export const CONTROL_BUCKET = 'trackd_control';

export const orgKey = (id: number) => `org.${id}`;
export const apiKeyKey = (id: string) => `key.${id}`;
const idsKey = (entity: string) => `ids.${entity}`;
const SIGNING_KEY = 'signing';
const TIMEOUT_MS = 5000;

/** An org as stored: its row and when it was created. */
export interface StoredOrg extends OrgRow {
  created_at: number;
}

/**
 * The cluster's control plane: orgs, API keys, id blocks and the token-signing key, one KV key
 * each, shared by every node. Every write is a create (revision 0) or an update over the revision
 * read, so two nodes racing on one key cannot both win: two orgs never get one id, two shards
 * never one id block, a revocation is never lost to a concurrent write. Each node mirrors the
 * bucket into its own control file (controlMirror.ts), where its threads read it.
 */
export class ControlKv {
  private constructor(private readonly bucket: LeaseBucket) {}

  static async open(nc: NatsConnection, replicas: number): Promise<ControlKv> {
    return new ControlKv(await LeaseBucket.open(nc, replicas, TIMEOUT_MS, CONTROL_BUCKET));
  }

  /** The bucket's stream (the mirror consumes it). */
  get stream(): string {
    return this.bucket.stream;
  }

  get prefix(): string {
    return this.bucket.prefix;
  }

  /** Creates the org under the first free id from `firstId` on, on the shard `placement` gives its id. */
  async createOrg(name: string, placement: (id: number) => number, firstId: number, now: number): Promise<StoredOrg> {
    for (let id = firstId; ; id++) {
      const org: StoredOrg = { id, name, shard: placement(id), created_at: now };
      try {
        await this.bucket.put(orgKey(id), org, 0);
        return org;
      } catch (err) {
        if (!(err instanceof RevisionMoved)) throw err;
      }
    }
  }

  async createKey(row: ApiKeyRow): Promise<void> {
    await this.bucket.put(apiKeyKey(row.id), row, 0);
  }

  /** Marks the key revoked at `now` (a revoked key keeps its first time); undefined when no such key exists. */
  async revokeKey(id: string, now: number): Promise<ApiKeyRow | undefined> {
    for (;;) {
      const current = await this.bucket.get<ApiKeyRow>(apiKeyKey(id));
      if (current === undefined) return undefined;
      if (current.value.revoked_at !== null) return current.value;
      const revoked = { ...current.value, revoked_at: now };
      try {
        await this.bucket.put(apiKeyKey(id), revoked, current.revision);
        return revoked;
      } catch (err) {
        if (!(err instanceof RevisionMoved)) throw err;
      }
    }
  }

  /** Reserves `count` ids of `entity`, never below `floor` (ids drawn before cluster mode, from the local file). */
  async reserveIds(entity: string, count: number, floor = 1): Promise<{ start: number; end: number }> {
    for (;;) {
      const current = await this.bucket.get<{ next: number }>(idsKey(entity));
      const start = Math.max(current?.value.next ?? 1, floor);
      try {
        await this.bucket.put(idsKey(entity), { next: start + count }, current?.revision ?? 0);
        return { start, end: start + count };
      } catch (err) {
        if (!(err instanceof RevisionMoved)) throw err;
      }
    }
  }

  /**
   * Makes DATA_DIR's signing key the cluster's: the first node to get here stores its own; every
   * other node takes that one in place of its own (tokens it signed alone before stop verifying).
   * Returns whether the local key was replaced.
   */
  async shareSigningKey(dataDir: string): Promise<boolean> {
    const local = await storedSigningKey(dataDir);
    let cluster: StoredKey;
    try {
      await this.bucket.put(SIGNING_KEY, local, 0);
      return false;
    } catch (err) {
      if (!(err instanceof RevisionMoved)) throw err;
      cluster = (await this.bucket.get<StoredKey>(SIGNING_KEY))!.value;
    }
    if (cluster.kid === local.kid) return false;
    replaceSigningKey(dataDir, cluster);
    return true;
  }
}
