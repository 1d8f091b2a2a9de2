import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';

export const SIGNING_ALG = 'EdDSA';

export interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
}

/** The key pair as stored (DATA_DIR/keys/signing-key.json; in cluster mode also the control bucket's `signing`). */
export interface StoredKey {
  kid: string;
  alg: string;
  privateJwk: JWK;
  publicJwk: JWK;
}

/**
 * The installation's token-signing key pair (Ed25519), generated on first use and kept in
 * DATA_DIR/keys. Created with O_EXCL so a CLI and a server starting together agree on one key.
 */
export async function loadSigningKey(dataDir: string): Promise<SigningKey> {
  const stored = await storedSigningKey(dataDir);
  return {
    kid: stored.kid,
    privateKey: (await importJWK(stored.privateJwk, SIGNING_ALG)) as CryptoKey,
    publicKey: (await importJWK(stored.publicJwk, SIGNING_ALG)) as CryptoKey,
  };
}

const keyFile = (dataDir: string) => path.join(dataDir, 'keys', 'signing-key.json');

/** The stored key pair of DATA_DIR, generated on first use. */
export async function storedSigningKey(dataDir: string): Promise<StoredKey> {
  const file = keyFile(dataDir);
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  if (!fs.existsSync(file)) {
    const pair = await generateKeyPair(SIGNING_ALG, { crv: 'Ed25519', extractable: true });
    const stored: StoredKey = {
      kid: randomUUID(),
      alg: SIGNING_ALG,
      privateJwk: await exportJWK(pair.privateKey),
      publicJwk: await exportJWK(pair.publicKey),
    };
    const tmp = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(stored), { mode: 0o600 });
    try {
      fs.linkSync(tmp, file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    } finally {
      fs.unlinkSync(tmp);
    }
  }
  return JSON.parse(fs.readFileSync(file, 'utf8')) as StoredKey;
}

/** Puts `stored` in DATA_DIR in place of its key (cluster mode: every node signs with the cluster's one key). */
export function replaceSigningKey(dataDir: string, stored: StoredKey): void {
  const file = keyFile(dataDir);
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(stored), { mode: 0o600 });
  fs.renameSync(tmp, file);
}
