import { randomBytes, timingSafeEqual } from 'node:crypto';
import { INTEGRATOR_SCOPES, signWebSession, verifySignature } from '../auth/tokens.js';
import type { Principal, WebSession } from '../auth/authenticator.js';
import type { SigningKey } from '../auth/signingKey.js';
import { ApiError } from '../errors/catalog.js';
import type { Accounts } from './accounts.js';

export const SESSION_COOKIE = 'trackd_session';
export const SESSION_TTL_MS = 8 * 3600_000;
/** The console reads what the public API's read scopes allow; keys it mints carry their own scopes. */
const SESSION_SCOPES = INTEGRATOR_SCOPES.filter((s) => s.endsWith(':read'));

export const sessionDetails = {
  missing: 'Sign in to continue',
  ended: 'Your session has ended; sign in again',
  csrf: 'This request did not come from the console page (missing or wrong CSRF token)',
  origin: 'Cross-origin request refused',
} as const;

/** What a request says about where it came from (the headers the console's defences read). */
export interface ClientInfo {
  cookie: string;
  origin: string;
  host: string;
  csrfToken: string;
  secFetchSite: string;
  forwardedProto: string;
  remoteAddress: string;
}

export function cookieValue(header: string, name: string): string | undefined {
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** HttpOnly, SameSite=Strict, Path=/console; Secure when the request came over TLS (through a proxy saying so). */
export function sessionCookie(client: ClientInfo, token: string, maxAgeSeconds: number): string {
  const secure = client.forwardedProto.toLowerCase() === 'https' ? '; Secure' : '';
  return `${SESSION_COOKIE}=${token}; Path=/console; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}${secure}`;
}

const ended = () => new ApiError('unauthorized', sessionDetails.ended);

/** Sessions of the console: minted at login, checked on every console request against their row (logout, expiry). */
export class SessionAuth {
  constructor(
    readonly accounts: Accounts,
    private readonly key: SigningKey,
  ) {}

  async start(userId: number, orgId: number, now: number): Promise<{ token: string; session: WebSession }> {
    const row = await this.accounts.createSession(userId, orgId, now, SESSION_TTL_MS);
    const csrf = randomBytes(24).toString('base64url');
    const token = await signWebSession(this.key, { sessionId: row.id, userId, orgId, csrf, expiresAt: row.expires_at });
    return { token, session: { id: row.id, userId, csrf, expiresAt: row.expires_at } };
  }

  /** The principal of the session cookie, or 401 (no cookie, bad signature, ended, expired, user no longer in the org). */
  async authenticate(cookieHeader: string, now: number): Promise<Principal> {
    const token = cookieValue(cookieHeader, SESSION_COOKIE);
    if (token === undefined || token === '') throw new ApiError('unauthorized', sessionDetails.missing);
    const claims = await verifySignature(this.key, token);
    if (claims === undefined || claims.typ !== 'session' || typeof claims.sid !== 'string' || typeof claims.csrf !== 'string')
      throw ended();
    const row = this.accounts.session(claims.sid);
    if (row === undefined || row.revoked_at !== null || row.expires_at <= now || row.org_id !== claims.org) throw ended();
    if (!this.accounts.belongs(row.user_id, row.org_id)) throw ended();
    return {
      apiKeyId: `session:${row.id}`,
      orgId: row.org_id,
      scopes: new Set(SESSION_SCOPES),
      scopeList: SESSION_SCOPES,
      expiresAt: row.expires_at,
      session: { id: row.id, userId: row.user_id, csrf: claims.csrf, expiresAt: row.expires_at },
    };
  }
}

const sameText = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

/**
 * Writes from a page of another site are refused: an Origin (or Sec-Fetch-Site) that is not this
 * server's, then (for a session) an X-CSRF-Token that is not the session's. SameSite=Strict keeps
 * the cookie off cross-site requests already; these hold where a browser or proxy does not.
 */
export function checkOrigin(client: ClientInfo): void {
  if (client.secFetchSite !== '' && client.secFetchSite !== 'same-origin' && client.secFetchSite !== 'none')
    throw new ApiError('forbidden', sessionDetails.origin);
  if (client.origin === '') return;
  const host = client.origin.replace(/^https?:\/\//, '');
  if (client.origin === 'null' || host !== client.host) throw new ApiError('forbidden', sessionDetails.origin);
}

export function checkCsrf(session: WebSession, client: ClientInfo): void {
  checkOrigin(client);
  if (!sameText(client.csrfToken, session.csrf)) throw new ApiError('forbidden', sessionDetails.csrf);
}

/** The client of a request that came from no browser (tools calling handlers directly). */
export const NO_CLIENT: ClientInfo = Object.freeze({
  cookie: '',
  origin: '',
  host: '',
  csrfToken: '',
  secFetchSite: '',
  forwardedProto: '',
  remoteAddress: '',
});
