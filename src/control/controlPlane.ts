import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { controlMigrations } from '../../migrations/control/index.js';
import { migrate, openDatabase, StatementCache, type Db } from '../storage/sqlite.js';
import type { ControlKv, StoredOrg } from './controlKv.js';

export interface OrgRow {
  id: number;
  name: string;
  shard: number;
}

export interface ApiKeyRow {
  id: string;
  org_id: number;
  name: string;
  scopes: string[];
  env: string;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
  /** When a server last authenticated a request with it, to the minute (KeyUse); null before. */
  last_used_at: number | null;
}

interface ApiKeyRecord extends Omit<ApiKeyRow, 'scopes'> {
  scopes: string;
}

const ID_BLOCK_SIZE = 1000;

/**
 * The control-plane database: organizations, API keys, the org-to-shard mapping and id blocks.
 * Shared by the server and the CLI (both open the same file under DATA_DIR). In cluster mode the
 * orgs and keys are the cluster's (ControlKv): writes go to the KV bucket first, and the file is
 * this node's mirror of it, where every read stays.
 */
export class ControlPlane {
  /** Statements on the request path (/orgs/me, first sight of a key, the revocation poll), prepared once. */
  private readonly statements: StatementCache;
  /** Cluster mode: the cluster's control plane, written before this mirror. */
  private kv: ControlKv | undefined;

  private constructor(readonly db: Db) {
    this.statements = new StatementCache(db);
  }

  static async open(dataDir: string): Promise<ControlPlane> {
    const file = path.join(dataDir, 'control.sqlite');
    await migrate(file, controlMigrations);
    return new ControlPlane(openDatabase(file));
  }

  close(): void {
    this.db.close();
  }

  /** Cluster mode: orgs and keys are written to the cluster's bucket, then mirrored here. */
  useKv(kv: ControlKv): void {
    this.kv = kv;
  }

  /** The cluster's bucket (cluster mode), where console users and sessions are written too. */
  get cluster(): ControlKv | undefined {
    return this.kv;
  }

  /**
   * Records the org's shard once, at creation, so the mapping never depends on a later SHARDS value:
   * `(id - 1) % shardCount`, or (cluster mode with partitioned input subjects) what `placement` says.
   */
  async createOrg(name: string, shardCount: number, placement?: (id: number) => number): Promise<OrgRow> {
    if (this.kv !== undefined) {
      const next = (this.db.prepare('SELECT COALESCE(MAX(id), 0) + 1 AS id FROM orgs').get() as { id: number }).id;
      const org = await this.kv.createOrg(name, placement ?? ((id) => (id - 1) % shardCount), next, Date.now());
      this.applyOrg(org);
      return { id: org.id, name: org.name, shard: org.shard };
    }
    return this.db
      .transaction(() => {
        const next = (this.db.prepare('SELECT COALESCE(MAX(id), 0) + 1 AS id FROM orgs').get() as { id: number }).id;
        const shard = (next - 1) % shardCount;
        const info = this.db
          .prepare('INSERT INTO orgs (id, name, shard, created_at) VALUES (?, ?, ?, ?)')
          .run(next, name, shard, Date.now());
        return { id: Number(info.lastInsertRowid), name, shard };
      })
      .immediate();
  }

  listOrgs(): OrgRow[] {
    return this.db.prepare('SELECT id, name, shard FROM orgs ORDER BY id').all() as OrgRow[];
  }

  getOrg(id: number): OrgRow | undefined {
    return this.statements.get('SELECT id, name, shard FROM orgs WHERE id = ?').get(id) as OrgRow | undefined;
  }

  async createKey(input: { orgId: number; name: string; scopes: string[]; env: string; expiresAt: number | null }): Promise<ApiKeyRow> {
    const row: ApiKeyRow = {
      id: randomUUID(),
      org_id: input.orgId,
      name: input.name,
      scopes: input.scopes,
      env: input.env,
      created_at: Date.now(),
      expires_at: input.expiresAt,
      revoked_at: null,
      last_used_at: null,
    };
    if (this.kv !== undefined) {
      await this.kv.createKey(row);
      this.applyKey(row);
      return row;
    }
    this.db
      .prepare(
        'INSERT INTO api_keys (id, org_id, name, scopes, env, created_at, expires_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, NULL)',
      )
      .run(row.id, row.org_id, row.name, JSON.stringify(row.scopes), row.env, row.created_at, row.expires_at);
    return row;
  }

  listKeys(orgId: number): ApiKeyRow[] {
    const rows = this.db.prepare('SELECT * FROM api_keys WHERE org_id = ? ORDER BY created_at, id').all(orgId) as ApiKeyRecord[];
    return rows.map((r) => ({ ...r, scopes: JSON.parse(r.scopes) as string[] }));
  }

  getKey(id: string): ApiKeyRow | undefined {
    const r = this.statements.get('SELECT * FROM api_keys WHERE id = ?').get(id) as ApiKeyRecord | undefined;
    return r && { ...r, scopes: JSON.parse(r.scopes) as string[] };
  }

  /** Returns the revocation time, or undefined when no such key exists. Revoking twice keeps the first time. */
  async revokeKey(id: string): Promise<number | undefined> {
    if (this.kv !== undefined) {
      const row = await this.kv.revokeKey(id, Date.now());
      if (row !== undefined) this.applyKey(row);
      return row?.revoked_at ?? undefined;
    }
    this.db.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL').run(Date.now(), id);
    const row = this.db.prepare('SELECT revoked_at FROM api_keys WHERE id = ?').get(id) as { revoked_at: number } | undefined;
    return row?.revoked_at;
  }

  /** Mirrors an org of the cluster's bucket into this file. */
  applyOrg(org: StoredOrg): void {
    this.statements
      .get('INSERT INTO orgs (id, name, shard, created_at) VALUES (?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET name = excluded.name')
      .run(org.id, org.name, org.shard, org.created_at);
  }

  /** Mirrors an API key of the cluster's bucket into this file (a revocation arrives as the key with its revoked_at). */
  applyKey(row: ApiKeyRow): void {
    this.statements
      .get(
        `INSERT INTO api_keys (id, org_id, name, scopes, env, created_at, expires_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT(id) DO UPDATE SET revoked_at = COALESCE(api_keys.revoked_at, excluded.revoked_at)`,
      )
      .run(row.id, row.org_id, row.name, JSON.stringify(row.scopes), row.env, row.created_at, row.expires_at, row.revoked_at);
  }

  /**
   * Records uses of keys (id, time): each key's last_used_at moves only forward and only when the
   * stored one is at least `grainMs` older, so that the threads and processes sharing this file
   * write a key at most once per grain between them.
   */
  recordKeyUse(uses: [string, number][], grainMs: number): void {
    const update = this.statements.get('UPDATE api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at <= ?)');
    this.db.transaction(() => {
      for (const [id, at] of uses) update.run(at, id, at - grainMs);
    })();
  }

  /** Keys revoked at or after `since` (ms); the server polls this to apply revocations within a second. */
  revokedSince(since: number): { id: string; revoked_at: number }[] {
    return this.statements.get('SELECT id, revoked_at FROM api_keys WHERE revoked_at >= ?').all(since) as {
      id: string;
      revoked_at: number;
    }[];
  }

  /** The next id of `entity` this file would hand out (1 when none was): cluster blocks start no lower. */
  localNextId(entity: string): number {
    const row = this.db.prepare('SELECT next_id FROM id_blocks WHERE entity = ?').get(entity) as { next_id: number } | undefined;
    return row?.next_id ?? 1;
  }

  /** Reserves a block of ids for one entity type; ids are unique per type across all shards. */
  reserveIds(entity: string, count = ID_BLOCK_SIZE): { start: number; end: number } {
    return this.db
      .transaction(() => {
        const row = this.db.prepare('SELECT next_id FROM id_blocks WHERE entity = ?').get(entity) as { next_id: number } | undefined;
        const start = row?.next_id ?? 1;
        this.db
          .prepare('INSERT INTO id_blocks (entity, next_id) VALUES (?, ?) ON CONFLICT(entity) DO UPDATE SET next_id = excluded.next_id')
          .run(entity, start + count);
        return { start, end: start + count };
      })
      .immediate();
  }
}
