import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { tempDir, type Teardown } from './trackd.js';

/**
 * A data dir that shares another's control plane as it is now (orgs, keys, id blocks, the signing
 * key: in a cluster they will live in NATS KV, one for every node) but none of its shards.
 */
export async function sharedControlPlane(t: Teardown, from: string): Promise<string> {
  const dir = tempDir();
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const control = new Database(path.join(from, 'control.sqlite'), { readonly: true });
  await control.backup(path.join(dir, 'control.sqlite'));
  control.close();
  fs.cpSync(path.join(from, 'keys'), path.join(dir, 'keys'), { recursive: true });
  return dir;
}
