import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { Teardown, Trackd } from './trackd.js';

/** What a raw socket exchange produced: the bytes received and how the connection ended. */
export interface RawExchange {
  response: string;
  status: number | undefined;
  headers: Record<string, string>;
  body: string;
  /** The server closed the connection (rather than our timeout). */
  closed: boolean;
  timedOut: boolean;
  ms: number;
}

export interface RawOptions {
  /** Pause before each body part (ms). */
  delayMs?: number;
  /** Give up (and destroy the socket) after this long. */
  timeoutMs?: number;
  /** Destroy the socket right after the last part was written. */
  disconnectAfterWrite?: boolean;
  /** After a complete response, wait (up to timeoutMs) for the server to close the connection. */
  waitForClose?: boolean;
}

/**
 * Sends `head` then `parts` over a plain TCP socket, for requests fetch cannot make (wrong lengths,
 * hand-made chunked encoding, invalid bytes, trickling, disconnecting midway).
 */
export function rawExchange(port: number, head: string, parts: (string | Buffer)[] = [], options: RawOptions = {}): Promise<RawExchange> {
  const { delayMs = 0, timeoutMs = 15_000, disconnectAfterWrite = false, waitForClose = false } = options;
  return new Promise((resolve) => {
    const started = Date.now();
    const socket = net.connect(port, '127.0.0.1');
    const received: Buffer[] = [];
    let settled = false;
    const settle = (closed: boolean, timedOut: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(parseResponse(Buffer.concat(received).toString('utf8'), closed, timedOut, Date.now() - started));
    };
    const timer = setTimeout(() => settle(false, true), timeoutMs);
    socket.on('data', (d: Buffer) => {
      received.push(d);
      // One response per exchange: stop once a complete one is in.
      const parsed = parseResponse(Buffer.concat(received).toString('utf8'), false, false, 0);
      const length = Number(parsed.headers['content-length'] ?? NaN);
      if (!waitForClose && parsed.status !== undefined && Buffer.byteLength(parsed.body) >= length) settle(false, false);
    });
    socket.on('close', () => settle(true, false));
    socket.on('error', () => settle(true, false));
    socket.write(head);
    void (async () => {
      for (const part of parts) {
        if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
        if (socket.destroyed || settled) return;
        socket.write(part);
      }
      if (disconnectAfterWrite) settle(true, false);
    })();
  });
}

function parseResponse(response: string, closed: boolean, timedOut: boolean, ms: number): RawExchange {
  const end = response.indexOf('\r\n\r\n');
  const headers: Record<string, string> = {};
  let status: number | undefined;
  let body = '';
  if (end >= 0) {
    const lines = response.slice(0, end).split('\r\n');
    status = Number(/^HTTP\/1\.1 (\d{3})/.exec(lines[0] ?? '')?.[1] ?? NaN) || undefined;
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
    }
    body = response.slice(end + 4);
  }
  return { response, status, headers, body, closed, timedOut, ms };
}

/** A request head for rawExchange. `contentLength` undefined leaves the header out. */
export function requestHead(method: string, urlPath: string, headers: Record<string, string | number | undefined>): string {
  let head = `${method} ${urlPath} HTTP/1.1\r\nHost: 127.0.0.1\r\n`;
  for (const [name, value] of Object.entries(headers)) if (value !== undefined) head += `${name}: ${value}\r\n`;
  return `${head}\r\n`;
}

/** Resident set size of a process in KiB, from /proc/<pid>/status. */
export function rssKiB(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
}

/**
 * Every row of every shard database of a trackd, as one comparable string. Reads the SQLite files
 * read-only beside the running server (WAL: each query sees the last committed state).
 */
export function shardSnapshotter(t: Teardown, trackd: Trackd): () => string {
  const dbs = new Map<string, Database.Database>();
  t.teardown(() => {
    for (const db of dbs.values()) db.close();
  });
  return () => {
    const dir = path.join(trackd.dataDir, 'shards');
    const out: string[] = [];
    for (const file of fs
      .readdirSync(dir)
      .filter((f) => f.endsWith('.sqlite'))
      .sort()) {
      let db = dbs.get(file);
      if (db === undefined) {
        db = new Database(path.join(dir, file), { readonly: true, fileMustExist: true });
        dbs.set(file, db);
      }
      const tables = db
        .prepare(
          "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'knex_%' AND name NOT LIKE 'sqlite_%' ORDER BY name",
        )
        .all() as { name: string }[];
      for (const { name } of tables) {
        const rows = (db.prepare(`SELECT * FROM "${name}"`).raw().all() as unknown[]).map((row) =>
          JSON.stringify(row, (_k, v) => (typeof v === 'bigint' ? String(v) : Buffer.isBuffer(v) ? v.toString('base64') : v)),
        );
        out.push(`${file}/${name}:${rows.sort().join('\n')}`);
      }
    }
    return out.join('\n');
  };
}

/** The error envelope rules of interface 7.1 that hold for every non-2xx answer; returns the problems. */
export function envelopeProblems(status: number, headers: Headers | Record<string, string>, text: string, instance: string): string[] {
  const get = (name: string) => (headers instanceof Headers ? headers.get(name) : headers[name.toLowerCase()]) ?? undefined;
  const problems: string[] = [];
  const contentType = get('content-type');
  if (!contentType?.startsWith('application/json')) problems.push(`content-type ${contentType}`);
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    return [...problems, `body is not JSON: ${text.slice(0, 200)}`];
  }
  const e = json?.error;
  if (typeof e !== 'object' || e === null) return [...problems, `no error object: ${text.slice(0, 200)}`];
  for (const k of ['type', 'title', 'detail', 'instance', 'request_id'])
    if (typeof e[k] !== 'string') problems.push(`error.${k} not a string`);
  if (e.status !== status) problems.push(`error.status ${e.status} != ${status}`);
  if (e.instance !== instance) problems.push(`error.instance ${e.instance} != ${instance}`);
  if (e.request_id !== get('x-request-id')) problems.push(`error.request_id ${e.request_id} != X-Request-ID ${get('x-request-id')}`);
  if (e.type === 'validation_error' && !(Array.isArray(e.fields) && e.fields.length > 0))
    problems.push('validation_error without fields[]');
  if (status === 500 || e.type === 'internal_error') problems.push(`internal error: ${text}`);
  return problems;
}

/** Waits until a child process exits; resolves with its exit code (null when killed by a signal). */
export function exited(child: {
  exitCode: number | null;
  signalCode?: NodeJS.Signals | null;
  once(event: 'exit', fn: (code: number | null) => void): unknown;
}): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}
