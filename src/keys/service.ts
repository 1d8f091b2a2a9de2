import { ADMIN_SCOPE, INTEGRATOR_SCOPES, signApiKey } from '../auth/tokens.js';
import type { SigningKey } from '../auth/signingKey.js';
import type { ControlPlane } from '../control/controlPlane.js';

/**
 * The one key service: the CLI (`trackd keys …`) and the console's API keys page both mint, list
 * and revoke through these functions, so a key is the same thing whichever minted it.
 */

export interface MintedKey {
  api_key_id: string;
  token: string;
  expires_at: string | null;
  scopes: string[];
}

export interface KeyView {
  api_key_id: string;
  org_id: number;
  name: string;
  scopes: string[];
  env: string;
  created_at: string | null;
  expires_at: string | null;
  revoked_at: string | null;
  /** When a server last authenticated a request with it, to the minute; null when never (or not since this was recorded). */
  last_used_at: string | null;
}

export const KEY_NAME_MAX = 255;

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** Why a scope cannot go on an integrator key, or undefined when it can. */
export function scopeProblem(scope: string): string | undefined {
  if (scope === ADMIN_SCOPE) return `${ADMIN_SCOPE} is for internal key administration and cannot be granted to an integrator key`;
  if (!(INTEGRATOR_SCOPES as readonly string[]).includes(scope))
    return `unknown scope ${JSON.stringify(scope)}; allowed: ${INTEGRATOR_SCOPES.join(', ')}`;
  return undefined;
}

/** Whole seconds (a JWT `exp` has no fraction): what is shown is what the server applies. */
export const wholeSeconds = (ms: number | null) => (ms === null ? null : Math.floor(ms / 1000) * 1000);

export async function mintKey(
  control: ControlPlane,
  signingKey: SigningKey,
  input: { orgId: number; name: string; scopes: string[]; env: string; expiresAt: number | null },
): Promise<MintedKey> {
  const expiresAt = wholeSeconds(input.expiresAt);
  const row = await control.createKey({ ...input, expiresAt });
  const token = await signApiKey(signingKey, { apiKeyId: row.id, orgId: input.orgId, scopes: input.scopes, env: input.env, expiresAt });
  return { api_key_id: row.id, token, expires_at: iso(expiresAt), scopes: input.scopes };
}

export function listKeys(control: ControlPlane, orgId: number): KeyView[] {
  return control.listKeys(orgId).map((k) => ({
    api_key_id: k.id,
    org_id: k.org_id,
    name: k.name,
    scopes: k.scopes,
    env: k.env,
    created_at: iso(k.created_at),
    expires_at: iso(k.expires_at),
    revoked_at: iso(k.revoked_at),
    last_used_at: iso(k.last_used_at),
  }));
}

/** The revocation time (ISO), or undefined when no such key exists. The servers poll revocations every 200 ms. */
export async function revokeKey(control: ControlPlane, id: string): Promise<string | undefined> {
  const at = await control.revokeKey(id);
  return at === undefined ? undefined : (iso(at) ?? undefined);
}
