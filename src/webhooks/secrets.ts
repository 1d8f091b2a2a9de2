import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { loadSigningKey } from '../auth/signingKey.js';

/**
 * Webhook signing secrets: made here, stored only encrypted (AES-256-GCM) in the shard file and in
 * the journal. The encryption key is derived (HKDF-SHA256) from the installation's token-signing
 * private key (DATA_DIR/keys/signing-key.json), so whoever can read the shard file or the journal
 * without that key file cannot read the secrets, and every thread and node that serves the
 * installation (they share that key to verify tokens) can decrypt them. Replacing the signing key
 * makes the stored secrets unreadable: rotate every endpoint's secret afterwards.
 */

const PREFIX = 'whsec_';
const VERSION = 'v1.';

/** A new secret in the Standard Webhooks form: `whsec_` + base64 of 32 random bytes. */
export function newSecret(): string {
  return PREFIX + randomBytes(32).toString('base64');
}

export async function secretsKey(dataDir: string): Promise<Buffer> {
  await loadSigningKey(dataDir);
  const stored = JSON.parse(fs.readFileSync(path.join(dataDir, 'keys', 'signing-key.json'), 'utf8')) as { privateJwk: { d: string } };
  return Buffer.from(hkdfSync('sha256', Buffer.from(stored.privateJwk.d, 'base64url'), 'trackd', 'webhook-secrets-v1', 32));
}

/** The secret encrypted for the organization's row (the org id is authenticated with it, so a ciphertext moved to another org fails). */
export function encryptSecret(key: Buffer, orgId: number, secret: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(`org:${orgId}`));
  const body = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
  return VERSION + Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64');
}

export function decryptSecret(key: Buffer, orgId: number, stored: string): string {
  if (!stored.startsWith(VERSION)) throw new Error('unknown webhook secret format');
  const raw = Buffer.from(stored.slice(VERSION.length), 'base64');
  const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
  decipher.setAAD(Buffer.from(`org:${orgId}`));
  decipher.setAuthTag(raw.subarray(12, 28));
  return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
}

/** One stored secret: encrypted, and the time (epoch ms) after which it no longer signs (null: current). */
export interface StoredSecret {
  enc: string;
  expires_at: number | null;
}

/**
 * The Standard Webhooks `webhook-signature` value: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`
 * for every secret given, space-separated (during a rotation both the new and the previous secret sign).
 */
export function signatureHeader(secrets: readonly string[], messageId: string, timestampSeconds: number, body: string): string {
  const content = `${messageId}.${timestampSeconds}.${body}`;
  return secrets
    .map(
      (secret) =>
        `v1,${createHmac('sha256', Buffer.from(secret.slice(PREFIX.length), 'base64'))
          .update(content)
          .digest('base64')}`,
    )
    .join(' ');
}
