import { createHash } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { LeaseBucket, RevisionMoved } from '../cluster/leaseBucket.js';
import { replaceSigningKey, storedSigningKey, type StoredKey } from '../auth/signingKey.js';
import type { ApiKeyRow, OrgRow } from './controlPlane.js';

/** The control plane's NATS KV bucket in cluster mode (docs/cluster.md, "The control plane in KV"). */
export const CONTROL_BUCKET = 'trackd_control';

export const orgKey = (id: number) => `org.${id}`;
export const apiKeyKey = (id: string) => `key.${id}`;
const idsKey = (entity: string) => `ids.${entity}`;
/** A console user's key: by email (created at revision 0, so one email is one user cluster-wide). */
export const userKey = (email: string) => `user.${createHash('sha256').update(email).digest('base64url')}`;
export const sessionKey = (id: string) => `session.${id}`;
const SIGNING_KEY = 'signing';
const TIMEOUT_MS = 5000;

/** A console user as stored (Accounts mirrors it into users and user_orgs). */
export interface StoredUser {
  id: number;
  email: string;
  password_hash: string;
  orgs: number[];
  created_at: number;
}

/** A console web session as stored (mirrored into web_sessions). */
export interface StoredSession {
  id: string;
  user_id: number;
  org_id: number;
  created_at: number;
  expires_at: number;
  revoked_at: number | null;
}

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

  /**
   * Changes the value of `key` over the revision read, again while another write moves it first.
   * `change` answers the new value, or undefined to keep the stored one. Undefined: no such key.
   */
  private async update<T>(key: string, change: (value: T) => T | undefined): Promise<T | undefined> {
    for (;;) {
      const current = await this.bucket.get<T>(key);
      if (current === undefined) return undefined;
      const next = change(current.value);
      if (next === undefined) return current.value;
      try {
        await this.bucket.put(key, next, current.revision);
        return next;
      } catch (err) {
        if (!(err instanceof RevisionMoved)) throw err;
      }
    }
  }

  /** Marks the key revoked at `now` (a revoked key keeps its first time); undefined when no such key exists. */
  revokeKey(id: string, now: number): Promise<ApiKeyRow | undefined> {
    return this.update<ApiKeyRow>(apiKeyKey(id), (row) => (row.revoked_at !== null ? undefined : { ...row, revoked_at: now }));
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

  /** The user stored under `email`, with the revision to update it over; undefined when none. */
  async user(email: string): Promise<{ value: StoredUser; revision: number } | undefined> {
    return this.bucket.get<StoredUser>(userKey(email));
  }

  /** Creates a user (its id drawn from the cluster's `user` ids); undefined when the email is taken meanwhile. */
  async createUser(email: string, passwordHash: string, orgs: number[], now: number, floor: number): Promise<StoredUser | undefined> {
    const { start: id } = await this.reserveIds('user', 1, floor);
    const user: StoredUser = { id, email, password_hash: passwordHash, orgs, created_at: now };
    try {
      await this.bucket.put(userKey(email), user, 0);
      return user;
    } catch (err) {
      if (!(err instanceof RevisionMoved)) throw err;
      return undefined;
    }
  }

  /** Adds organizations to the user of `email`; returns the stored user (undefined: no such user). */
  addUserOrgs(email: string, orgs: number[]): Promise<StoredUser | undefined> {
    return this.update<StoredUser>(userKey(email), (user) => {
      const merged = [...new Set([...user.orgs, ...orgs])];
      return merged.length === user.orgs.length ? undefined : { ...user, orgs: merged };
    });
  }

  async createSession(session: StoredSession): Promise<void> {
    await this.bucket.put(sessionKey(session.id), session, 0);
  }

  /** Ends a session (a logout, an org switch); the first end time stays. Undefined when there is no such session. */
  endSession(id: string, now: number): Promise<StoredSession | undefined> {
    return this.update<StoredSession>(sessionKey(id), (session) =>
      session.revoked_at !== null ? undefined : { ...session, revoked_at: now },
    );
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
