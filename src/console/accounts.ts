import { randomUUID } from 'node:crypto';
import type { ControlPlane } from '../control/controlPlane.js';
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

  createUser(email: string, passwordHash: string, orgIds: number[], now = Date.now()): { id: number; email: string; orgs: number[] } {
    const normalized = normalizeEmail(email);
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
  addOrgs(userId: number, orgIds: number[]): number[] {
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

  createSession(userId: number, orgId: number, now: number, ttlMs: number): SessionRow {
    const row: SessionRow = { id: randomUUID(), user_id: userId, org_id: orgId, expires_at: now + ttlMs, revoked_at: null };
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

  endSession(id: string, now: number): void {
    this.statements.get('UPDATE web_sessions SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL').run(now, id);
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
