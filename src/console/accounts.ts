import { randomUUID } from 'node:crypto';
import type { StoredSession, StoredUser } from '../control/controlKv.js';
import type { ControlPlane } from '../control/controlPlane.js';
import { conflict } from '../errors/domain.js';
import { StatementCache } from '../storage/sqlite.js';

export interface UserRow {
  id: number;
  email: string;
  password_hash: string;
}

export interface SessionRow {
  id: string;
  user_id: number;
  org_id: number;
  expires_at: number;
  revoked_at: number | null;
}

export interface OrgChoice {
  id: number;
  name: string;
}

/** Emails compared as people type them: trimmed, lower case. */
export const normalizeEmail = (email: string) => email.trim().toLowerCase();

/**
 * Console users, their organizations, web sessions and failed logins, in the control-plane file
 * (migration control/003). The server and the CLI share it as they share the keys.
 */
export class Accounts {
  private readonly statements: StatementCache;

  constructor(private readonly control: ControlPlane) {
    this.statements = new StatementCache(control.db, 32);
  }

  private get db() {
    return this.control.db;
  }

  /** Creates a user; in cluster mode in the cluster's bucket first (cluster-wide ids, one user per email), then here. */
  async createUser(
    email: string,
    passwordHash: string,
    orgIds: number[],
    now = Date.now(),
  ): Promise<{ id: number; email: string; orgs: number[] }> {
    const normalized = normalizeEmail(email);
    const kv = this.control.cluster;
    if (kv !== undefined) {
      const floor = (this.db.prepare('SELECT COALESCE(MAX(id), 0) + 1 AS id FROM users').get() as { id: number }).id;
      const user = await kv.createUser(normalized, passwordHash, orgIds, now, floor);
      if (user === undefined) throw conflict(`A console user with email ${normalized} was created at the same time on another node`);
      this.applyUser(user);
      return { id: user.id, email: normalized, orgs: orgIds };
    }
    return this.db
      .transaction(() => {
        const info = this.db
          .prepare('INSERT INTO users (email, password_hash, created_at) VALUES (?, ?, ?)')
          .run(normalized, passwordHash, now);
        const id = Number(info.lastInsertRowid);
        const add = this.db.prepare('INSERT OR IGNORE INTO user_orgs (user_id, org_id) VALUES (?, ?)');
        for (const org of orgIds) add.run(id, org);
        return { id, email: normalized, orgs: orgIds };
      })
      .immediate();
  }

  /** Adds organizations to an existing user; returns all of the user's organization ids. */
  async addOrgs(userId: number, orgIds: number[]): Promise<number[]> {
    const kv = this.control.cluster;
    const email = this.userById(userId)?.email;
    if (kv !== undefined && email !== undefined) {
      const user = await kv.addUserOrgs(email, orgIds);
      if (user !== undefined) this.applyUser(user);
      return this.orgsOf(userId).map((o) => o.id);
    }
    const add = this.db.prepare('INSERT OR IGNORE INTO user_orgs (user_id, org_id) VALUES (?, ?)');
    for (const org of orgIds) add.run(userId, org);
    return this.orgsOf(userId).map((o) => o.id);
  }

  findUser(email: string): UserRow | undefined {
    return this.statements.get('SELECT id, email, password_hash FROM users WHERE email = ?').get(normalizeEmail(email)) as
      | UserRow
      | undefined;
  }

  userById(id: number): { id: number; email: string } | undefined {
    return this.statements.get('SELECT id, email FROM users WHERE id = ?').get(id) as { id: number; email: string } | undefined;
  }

  orgsOf(userId: number): OrgChoice[] {
    return this.statements
      .get('SELECT o.id, o.name FROM user_orgs u JOIN orgs o ON o.id = u.org_id WHERE u.user_id = ? ORDER BY o.name, o.id')
      .all(userId) as OrgChoice[];
  }

  belongs(userId: number, orgId: number): boolean {
    return this.statements.get('SELECT 1 FROM user_orgs WHERE user_id = ? AND org_id = ?').get(userId, orgId) !== undefined;
  }

  async createSession(userId: number, orgId: number, now: number, ttlMs: number): Promise<SessionRow> {
    const row: SessionRow = { id: randomUUID(), user_id: userId, org_id: orgId, expires_at: now + ttlMs, revoked_at: null };
    const kv = this.control.cluster;
    if (kv !== undefined) {
      // In the cluster's bucket, so that the session works on every node (each mirrors it).
      const stored: StoredSession = { ...row, created_at: now };
      await kv.createSession(stored);
      this.applySession(stored);
      return row;
    }
    this.statements
      .get('INSERT INTO web_sessions (id, user_id, org_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?)')
      .run(row.id, userId, orgId, now, row.expires_at);
    return row;
  }

  session(id: string): SessionRow | undefined {
    return this.statements.get('SELECT id, user_id, org_id, expires_at, revoked_at FROM web_sessions WHERE id = ?').get(id) as
      | SessionRow
      | undefined;
  }

  async endSession(id: string, now: number): Promise<void> {
    const kv = this.control.cluster;
    if (kv !== undefined) {
      const ended = await kv.endSession(id, now);
      if (ended !== undefined) this.applySession(ended);
      return;
    }
    this.statements.get('UPDATE web_sessions SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL').run(now, id);
  }

  /** Mirrors a user of the cluster's bucket into this file (its organizations are only ever added). */
  applyUser(user: StoredUser): void {
    this.db.transaction(() => {
      this.statements
        .get(
          `INSERT INTO users (id, email, password_hash, created_at) VALUES (?, ?, ?, ?)
           ON CONFLICT(id) DO UPDATE SET email = excluded.email, password_hash = excluded.password_hash`,
        )
        .run(user.id, user.email, user.password_hash, user.created_at);
      const add = this.statements.get('INSERT OR IGNORE INTO user_orgs (user_id, org_id) VALUES (?, ?)');
      for (const org of user.orgs) add.run(user.id, org);
    })();
  }

  /** Mirrors a web session of the cluster's bucket into this file (an end arrives as the session with its revoked_at). */
  applySession(session: StoredSession): void {
    this.statements
      .get(
        `INSERT INTO web_sessions (id, user_id, org_id, created_at, expires_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT(id) DO UPDATE SET revoked_at = COALESCE(web_sessions.revoked_at, excluded.revoked_at)`,
      )
      .run(session.id, session.user_id, session.org_id, session.created_at, session.expires_at, session.revoked_at);
  }

  /** Failed logins of any of `subjects` since `since`, with the oldest one's time (for Retry-After). */
  failures(subjects: string[], since: number): { subject: string; count: number; oldest: number }[] {
    const count = this.statements.get('SELECT count(*) AS count, min(at) AS oldest FROM login_failures WHERE subject = ? AND at >= ?');
    return subjects.map((subject) => ({ subject, ...(count.get(subject, since) as { count: number; oldest: number }) }));
  }

  recordFailure(subjects: string[], now: number): void {
    const insert = this.statements.get('INSERT INTO login_failures (subject, at) VALUES (?, ?)');
    this.db.transaction(() => {
      for (const s of subjects) insert.run(s, now);
      // Old failures have no further use: the table holds about one window's worth.
      this.statements.get('DELETE FROM login_failures WHERE at < ?').run(now - 24 * 3600_000);
    })();
  }

  clearFailures(subject: string): void {
    this.statements.get('DELETE FROM login_failures WHERE subject = ?').run(subject);
  }
}
