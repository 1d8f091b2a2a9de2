import { ApiError } from '../errors/catalog.js';
import { systemClock, type Clock } from '../clock.js';
import type { ControlPlane } from '../control/controlPlane.js';
import type { Logger } from '../log.js';
import type { SigningKey } from './signingKey.js';
import { KeyUse } from './keyUse.js';
import { verifySignature } from './tokens.js';

export const AUTH_REALM = 'trackd-api';
const WWW_AUTHENTICATE = { 'WWW-Authenticate': `Bearer realm="${AUTH_REALM}"` };
const CACHE_LIMIT = 10_000;
const REVOCATION_POLL_MS = 200;

export interface Principal {
  apiKeyId: string;
  orgId: number;
  scopes: ReadonlySet<string>;
  scopeList: readonly string[];
  expiresAt: number | null;
  /** Set when the caller is a console web session (cookie), not an API key. */
  session?: WebSession;
}

export interface WebSession {
  id: string;
  userId: number;
  /** The token every write of this session must carry in X-CSRF-Token. */
  csrf: string;
  expiresAt: number;
}

export const authDetails = {
  missing: 'Missing authorization header',
  format: 'Invalid authorization header format',
  invalid: 'Invalid or expired token',
  revoked: 'API key has been revoked',
  expired: 'API key has expired',
  wrongHeader: 'Use Authorization: Bearer <token>',
} as const;

export function unauthorized(detail: string): ApiError {
  return new ApiError('unauthorized', detail, { headers: WWW_AUTHENTICATE });
}

/**
 * Verifies bearer API keys. The first sight of a token costs a signature check and a key lookup;
 * after that a cache hit costs a map lookup plus the revocation and expiry checks. Revocations are
 * polled from the control plane, so a revoke through the CLI reaches the server within a second.
 *
 * The cache is a Map bounded by dropping its oldest entry, not lru-cache: every request of a known
 * key is a hit, and revocation and expiry are checked on each hit whatever the eviction order.
 * Measured in one process (2M lookups, median of 7 rounds): Map 91 ns, LRUCache 125 ns.
 */
export class Authenticator {
  private readonly cache = new Map<string, Principal>();
  private readonly revoked = new Set<string>();
  private readonly timer: NodeJS.Timeout;
  private lastPoll: number;
  private readonly keyUse: KeyUse;

  constructor(
    private readonly control: ControlPlane,
    private readonly key: SigningKey,
    private readonly env: string,
    private readonly logger: Logger,
    private readonly clock: Clock = systemClock,
  ) {
    this.lastPoll = clock.now();
    this.keyUse = new KeyUse(control);
    this.timer = setInterval(() => {
      this.pollRevocations();
      this.recordKeyUse();
    }, REVOCATION_POLL_MS);
    this.timer.unref();
  }

  close(): void {
    clearInterval(this.timer);
    this.recordKeyUse();
  }

  private recordKeyUse(): void {
    try {
      this.keyUse.flush();
    } catch (err) {
      // Kept queued for the next tick; a busy or closed control file must not end the process.
      this.logger.warn({ err }, 'recording API key use failed');
    }
  }

  private pollRevocations(): void {
    const now = this.clock.now();
    try {
      for (const row of this.control.revokedSince(this.lastPoll - 5_000)) this.revoked.add(row.id);
      this.lastPoll = now;
    } catch (err) {
      // A timer callback must not throw (it would end the process); the next poll retries the same span.
      this.logger.error({ err }, 'revocation poll failed');
    }
  }

  /** Extracts the token from the Authorization header, or throws the 401 for its absence or shape. */
  static bearerToken(authorization: string, hasApiKeyHeader: boolean): string {
    if (authorization === '') throw unauthorized(hasApiKeyHeader ? authDetails.wrongHeader : authDetails.missing);
    const m = /^Bearer +([^\s]+) *$/i.exec(authorization);
    if (m === null) throw unauthorized(authDetails.format);
    return m[1]!; // the group is not optional
  }

  /** The cached principal for a token, checked for revocation and expiry; undefined when not cached. */
  cached(token: string, now: number): Principal | undefined {
    const p = this.cache.get(token);
    if (p === undefined) return undefined;
    this.check(p, now);
    this.keyUse.seen(p.apiKeyId, now);
    return p;
  }

  /** Whether a principal authenticated earlier (a stream's) is still good: not revoked, not expired. */
  valid(p: Principal, now: number): boolean {
    return !this.revoked.has(p.apiKeyId) && (p.expiresAt === null || p.expiresAt > now);
  }

  private check(p: Principal, now: number): void {
    if (this.revoked.has(p.apiKeyId)) throw unauthorized(authDetails.revoked);
    if (p.expiresAt !== null && p.expiresAt <= now) throw unauthorized(authDetails.expired);
  }

  async verify(token: string): Promise<Principal> {
    const claims = await verifySignature(this.key, token);
    if (claims === undefined || claims.typ !== 'api_key' || claims.env !== this.env || !Array.isArray(claims.scopes)) {
      throw unauthorized(authDetails.invalid);
    }
    const now = this.clock.now();
    if (claims.nbf !== undefined && claims.nbf * 1000 > now) throw unauthorized(authDetails.invalid);
    const row = this.control.getKey(claims.sub);
    if (row === undefined || row.org_id !== claims.org) throw unauthorized(authDetails.invalid);
    if (row.revoked_at !== null) {
      this.revoked.add(row.id);
      throw unauthorized(authDetails.revoked);
    }
    const principal: Principal = {
      apiKeyId: row.id,
      orgId: row.org_id,
      scopes: new Set(claims.scopes),
      scopeList: claims.scopes,
      expiresAt: claims.exp !== undefined ? claims.exp * 1000 : null,
    };
    this.check(principal, now);
    this.keyUse.seen(principal.apiKeyId, now);
    if (this.cache.size >= CACHE_LIMIT) this.cache.delete(this.cache.keys().next().value as string);
    this.cache.set(token, principal);
    return principal;
  }
}
