import { SignJWT, compactVerify, decodeProtectedHeader } from 'jose';
import { SIGNING_ALG, type SigningKey } from './signingKey.js';

export const ISSUER = 'trackd';
export const INTEGRATOR_SCOPES = [
  'assets:read',
  'assets:write',
  'locations:read',
  'locations:write',
  'tracking:read',
  'webhooks:read',
  'webhooks:write',
] as const;
export const ADMIN_SCOPE = 'keys:admin';

export type TokenKind = 'api_key' | 'session';

export interface TokenClaims {
  iss: string;
  sub: string;
  typ: TokenKind;
  org: number;
  env?: string;
  scopes?: string[];
  iat: number;
  exp?: number;
  nbf?: number;
  /** Web sessions (signWebSession) only. */
  sid?: string;
  csrf?: string;
}

export async function signApiKey(
  key: SigningKey,
  claims: { apiKeyId: string; orgId: number; scopes: string[]; env: string; expiresAt: number | null },
): Promise<string> {
  const jwt = new SignJWT({ typ: 'api_key', org: claims.orgId, scopes: claims.scopes, env: claims.env })
    .setProtectedHeader({ alg: SIGNING_ALG, kid: key.kid, typ: 'JWT' })
    .setIssuer(ISSUER)
    .setSubject(claims.apiKeyId)
    .setIssuedAt();
  if (claims.expiresAt !== null) jwt.setExpirationTime(Math.floor(claims.expiresAt / 1000));
  return jwt.sign(key.privateKey);
}

export async function signSession(key: SigningKey, claims: { orgId: number; user: string; ttlSeconds: number }): Promise<string> {
  return new SignJWT({ typ: 'session', org: claims.orgId })
    .setProtectedHeader({ alg: SIGNING_ALG, kid: key.kid, typ: 'JWT' })
    .setIssuer(ISSUER)
    .setSubject(claims.user)
    .setIssuedAt()
    .setExpirationTime(`${claims.ttlSeconds}s`)
    .sign(key.privateKey);
}

/**
 * Verifies the signature with the algorithm pinned to EdDSA and the kid checked, so `alg: none`,
 * HS256-with-the-public-key and foreign keys all fail. Claim checks (expiry, type) are the caller's,
 * because their failures have distinct answers. Returns undefined for anything malformed.
 *
 * Not jose's jwtVerify: it checks `exp` before we can look the key up, so a revoked key that has
 * also expired would be told "expired" where the contract's order says "revoked", and each claim
 * failure would come back as an exception to map to its detail. Speed does not argue either way:
 * this runs once per token, on a cache miss; every later request is a Map hit.
 */
export async function verifySignature(key: SigningKey, token: string): Promise<TokenClaims | undefined> {
  try {
    const header = decodeProtectedHeader(token);
    if (header.alg !== SIGNING_ALG || header.kid !== key.kid) return undefined;
    const { payload } = await compactVerify(token, key.publicKey, { algorithms: [SIGNING_ALG] });
    const claims = JSON.parse(new TextDecoder().decode(payload)) as TokenClaims;
    if (typeof claims !== 'object' || claims === null || claims.iss !== ISSUER || typeof claims.sub !== 'string') return undefined;
    if (!Number.isSafeInteger(claims.org)) return undefined;
    return claims;
  } catch {
    return undefined;
  }
}

/** A console web session: `sub` is the user id, `sid` the web_sessions row, `csrf` the token its writes must echo. */
export async function signWebSession(
  key: SigningKey,
  claims: { sessionId: string; userId: number; orgId: number; csrf: string; expiresAt: number },
): Promise<string> {
  return new SignJWT({ typ: 'session', org: claims.orgId, sid: claims.sessionId, csrf: claims.csrf })
    .setProtectedHeader({ alg: SIGNING_ALG, kid: key.kid, typ: 'JWT' })
    .setIssuer(ISSUER)
    .setSubject(String(claims.userId))
    .setIssuedAt()
    .setExpirationTime(Math.floor(claims.expiresAt / 1000))
    .sign(key.privateKey);
}
