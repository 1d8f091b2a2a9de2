import { spawn, spawnSync } from 'node:child_process';
import type { Trackd } from './trackd.js';
import { BIN } from './trackd.js';

export const PASSWORD = 'correct horse battery staple';

/** `trackd users create` as an operator runs it, the password on stdin; returns its JSON or throws with stderr. */
export function createUser(trackd: Trackd, email: string, orgIds: number[], password = PASSWORD): any {
  const r = cliUsers(trackd, email, orgIds, password);
  if (r.status !== 0) throw new Error(`users create failed (${r.status}): ${r.stderr}`);
  return JSON.parse(r.stdout);
}

export function cliUsers(trackd: Trackd, email: string, orgIds: number[], password: string) {
  const args = ['users', 'create', '--email', email, ...orgIds.flatMap((id) => ['--org', String(id)])];
  return spawnSync(process.execPath, [BIN, ...args], { env: { ...process.env, ...trackd.env }, input: `${password}\n`, encoding: 'utf8' });
}

export interface Login {
  cookie: string;
  csrf: string;
  body: any;
}

/** Signs in over the in-process pipeline; returns the cookie pair to send back and the CSRF token. */
export async function login(trackd: Trackd, email: string, orgId?: number, password = PASSWORD): Promise<Login> {
  const res = await trackd.request('POST', '/console/api/login', {
    body: { email, password, ...(orgId === undefined ? {} : { org_id: orgId }) },
  });
  if (res.status !== 200) throw new Error(`login failed: ${res.status} ${res.text}`);
  const setCookie = res.headers.get('set-cookie') ?? '';
  return { cookie: setCookie.split(';')[0]!, csrf: res.json.data.csrf_token, body: res.json };
}

/**
 * `trackd users create` at a terminal (a pty from util-linux `script`): the password typed after the
 * prompt appears, and is echoed by nothing. Returns everything the terminal showed.
 */
export function createUserAtPrompt(trackd: Trackd, email: string, orgId: number, password: string): Promise<string> {
  const command = `${process.execPath} ${BIN} users create --email ${email} --org ${orgId}`;
  const child = spawn('script', ['-qec', command, '/dev/null'], {
    env: { ...process.env, ...trackd.env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let shown = '';
  return new Promise((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      const before = shown;
      shown += chunk.toString('utf8');
      if (!before.includes('password:') && shown.includes('password:')) child.stdin.write(`${password}\r`);
    });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(shown) : reject(new Error(`users create at a prompt exited ${code}: ${shown}`))));
  });
}
