import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runCommand } from '../../src/cli/commands.js';
import type { Clock } from '../../src/clock.js';
import { loadConfig } from '../../src/config.js';
import { startNatsServer, type NatsServerProcess } from '../../src/nats/embedded.js';
import { serve, type RunningService } from '../../src/serve.js';
import type { OwnershipTable } from '../../src/cluster/ownershipTable.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const BIN = path.join(ROOT, 'bin', 'trackd.js');

/** The subset of tap's Test the helpers need (teardown registration). */
export interface Teardown {
  teardown(fn: () => unknown): void;
}

export function tempDir(prefix = 'trackd-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** A real nats-server with JetStream on a free port and a temp store, stopped at teardown. */
export async function startNats(t: Teardown, options: { mqtt?: boolean; extraConfig?: string[] } = {}): Promise<NatsServerProcess> {
  const { server, stop } = await ownNats(options);
  t.teardown(stop);
  return server;
}

async function ownNats(
  options: { mqtt?: boolean; extraConfig?: string[] } = {},
): Promise<{ server: NatsServerProcess; stop: () => Promise<void> }> {
  const dir = tempDir('trackd-nats-');
  const server = await startNatsServer({
    storeDir: dir,
    mqttPort: options.mqtt ? 0 : undefined,
    serverName: `test-${path.basename(dir)}`,
    extraConfig: options.extraConfig,
  });
  return {
    server,
    async stop() {
      await server.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface HttpResult {
  status: number;
  headers: Headers;
  text: string;
  /** Parsed JSON body (undefined when empty or not JSON). */
  json: any;
}

export interface RequestOptions {
  token?: string;
  headers?: Record<string, string>;
  /** Serialized with JSON.stringify unless a string or Buffer. */
  body?: unknown;
  contentType?: string | null;
}

export interface Trackd {
  port: number;
  baseUrl: string;
  dataDir: string;
  natsUrl: string;
  env: Record<string, string>;
  /** The child process (spawnTrackd only). */
  process: ChildProcess;
  /** Every log line the server printed so far, parsed. */
  logs(): any[];
  /**
   * A request through trackd's whole pipeline: injected without a socket when trackd runs in this
   * process (startTrackd), over HTTP when it is a child (spawnTrackd).
   */
  request(method: string, urlPath: string, options?: RequestOptions): Promise<HttpResult>;
  /** A request over a real HTTP connection to trackd's port (the wire contract). */
  http(method: string, urlPath: string, options?: RequestOptions): Promise<HttpResult>;
  /** Runs the CLI against this server's DATA_DIR; returns parsed stdout or throws with stderr. */
  cli(args: string[], extraEnv?: Record<string, string>): Promise<any>;
  cliRaw(args: string[], extraEnv?: Record<string, string>): { status: number | null; stdout: string; stderr: string };
  createOrg(name?: string): Promise<{ id: number; name: string }>;
  createKey(
    orgId: number,
    scopes?: string[],
    extra?: string[],
  ): Promise<{ api_key_id: string; token: string; expires_at: string | null; scopes: string[] }>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  restart(): Promise<void>;
  /** Cluster mode, startTrackd only: the shards the node serves (set by hand in tests of shard RPC). */
  ownership(): OwnershipTable;
}

export const ALL_SCOPES = ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read'];

export interface StartOptions {
  env?: Record<string, string>;
  /** An existing NATS URL; default: a fresh nats-server for this trackd. 'embedded' leaves NATS_URL unset. */
  natsUrl?: string | 'embedded';
  dataDir?: string;
  /** The clock of the in-process service (startTrackd only): `advance` it past an expiry instead of sleeping. */
  clock?: TestClock;
  /** startTrackd only: each shard actor records its committed state changes in this directory (serve's recordDir). */
  recordDir?: string;
}

/** The wall clock moved forward by hand: time still passes, so timeouts and deadlines keep working. */
export interface TestClock extends Clock {
  advance(ms: number): void;
}

export function testClock(): TestClock {
  let offset = 0;
  return {
    now: () => Date.now() + offset,
    advance: (ms) => {
      offset += ms;
    },
  };
}

async function launch(env: Record<string, string>): Promise<{ child: ChildProcess; port: number; lines: string[] }> {
  const child = spawn(process.execPath, [BIN, 'serve'], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const port = await new Promise<number>((resolve, reject) => {
    let buffer = '';
    // A deadline against a hang, not a speed check: a loaded machine (load average 30 on 2 cores) took over 30 s.
    const timer = setTimeout(() => reject(new Error(`trackd did not start within 120 s: ${stderr}`)), 120_000);
    child.stdout!.on('data', (d: Buffer) => {
      buffer += d.toString();
      let nl: number;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        lines.push(line);
        if (line.includes('"msg":"listening"')) {
          clearTimeout(timer);
          resolve(JSON.parse(line).port as number);
        }
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`trackd exited with ${code} before listening: ${stderr}`));
    });
  });
  return { child, port, lines };
}

function parseJsonLines(text: string): any[] {
  return text.split('\n').flatMap((l) => {
    try {
      return l === '' ? [] : [JSON.parse(l)];
    } catch {
      return [];
    }
  });
}

/** Headers and body of a request as the helpers send it: JSON unless a string or Buffer, merge-patch for PATCH. */
function outgoing(method: string, opts: RequestOptions): { headers: Record<string, string>; body: string | Buffer | undefined } {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token}`;
  let body: string | Buffer | undefined;
  if (opts.body !== undefined) {
    body = typeof opts.body === 'string' || Buffer.isBuffer(opts.body) ? opts.body : JSON.stringify(opts.body);
    const ct =
      opts.contentType === undefined ? (method === 'PATCH' ? 'application/merge-patch+json' : 'application/json') : opts.contentType;
    if (ct !== null) headers['content-type'] = ct;
  }
  return { headers, body };
}

function result(status: number, headers: Headers, text: string): HttpResult {
  let json: any;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status, headers, text, json };
}

async function overHttp(port: number, method: string, urlPath: string, opts: RequestOptions = {}): Promise<HttpResult> {
  const { headers, body } = outgoing(method, opts);
  const res = await httpRequest(port, method, urlPath, headers, body);
  return result(res.status, res.headers, res.text);
}

/**
 * The environment a test's trackd runs with: a free port, its own DATA_DIR and nats-server, two
 * shards. `release` removes what was made for it, after trackd stopped (tap runs teardowns in the
 * order they were registered: a broker stopped under a running trackd would stall its shutdown).
 */
async function testEnv(
  options: StartOptions,
): Promise<{ env: Record<string, string>; dataDir: string; natsUrl: string | 'embedded'; release: () => Promise<void> }> {
  const dataDir = options.dataDir ?? tempDir();
  const nats = options.natsUrl === undefined ? await ownNats() : undefined;
  const natsUrl = options.natsUrl ?? nats!.server.url;
  const env: Record<string, string> = { PORT: '0', DATA_DIR: dataDir, LOG_LEVEL: 'info', SHARDS: '2', HTTP_THREADS: '2', ...options.env };
  if (natsUrl !== 'embedded') env.NATS_URL = natsUrl;
  const release = async () => {
    await nats?.stop();
    if (options.dataDir === undefined) fs.rmSync(dataDir, { recursive: true, force: true });
  };
  return { env, dataDir, natsUrl, release };
}

/** The CLI as a child process (exit status, stdout, stderr), against a test's trackd. */
/**
 * Runs the trackd CLI in a child process without blocking this one (cliRaw blocks it: an in-process
 * trackd's consumer and timers on this thread then wait for the command).
 */
export function runCli(trackd: Pick<Trackd, 'env'>, args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...trackd.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
    });
    child.on('error', reject).on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

function cliProcess(env: Record<string, string>) {
  return (args: string[], extraEnv: Record<string, string> = {}) => {
    const r = spawnSync(process.execPath, [BIN, ...args], { env: { ...process.env, ...env, ...extraEnv }, encoding: 'utf8' });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  };
}

/** CLI commands that run in this process (they take everything from the configuration). */
const IN_PROCESS_COMMANDS = new Set([
  'orgs create',
  'orgs list',
  'keys create',
  'keys list',
  'keys revoke',
  'sessions create',
  'scans publish',
]);

/**
 * Starts trackd's service in this process (`serve()`: its shard and HTTP threads, the scan consumer
 * on this thread) on a free port, with its own DATA_DIR and nats-server. `request` goes through the
 * whole pipeline without a socket; `http` over the port. Logs go to a file that `logs()` reads.
 */
export async function startTrackd(t: Teardown, options: StartOptions = {}): Promise<Trackd> {
  const { env, dataDir, natsUrl, release } = await testEnv(options);
  const logDir = tempDir('trackd-log-');
  const logFile = path.join(logDir, 'trackd.log');
  const config = () => loadConfig({ ...process.env, ...env });
  let service: RunningService | undefined;
  try {
    service = await serve(config(), { logFile, clock: options.clock, recordDir: options.recordDir });
  } catch (err) {
    fs.rmSync(logDir, { recursive: true, force: true });
    await release();
    throw err;
  }
  t.teardown(async () => {
    await service?.stop();
    fs.rmSync(logDir, { recursive: true, force: true });
    await release();
  });
  const running = () => {
    if (service === undefined) throw new Error('trackd is stopped');
    return service;
  };
  const cliRaw = cliProcess(env);
  const trackd: Trackd = {
    get port() {
      return running().port;
    },
    get baseUrl() {
      return `http://127.0.0.1:${running().port}`;
    },
    dataDir,
    natsUrl: natsUrl === 'embedded' ? running().natsUrl : natsUrl,
    env,
    get process(): ChildProcess {
      throw new Error('trackd runs in this process: use spawnTrackd for a child process');
    },
    logs: () => (fs.existsSync(logFile) ? parseJsonLines(fs.readFileSync(logFile, 'utf8')) : []),
    async request(method, urlPath, opts = {}) {
      const { headers, body } = outgoing(method, opts);
      if (body === undefined && (method === 'POST' || method === 'PUT' || method === 'PATCH')) headers['content-length'] = '0';
      const res = await running().inject({ method, url: urlPath, headers, body });
      return result(res.status, new Headers(res.headers), res.body);
    },
    http: (method, urlPath, opts) => overHttp(running().port, method, urlPath, opts),
    cliRaw,
    async cli(args, extraEnv = {}) {
      if (!IN_PROCESS_COMMANDS.has(`${args[0]} ${args[1]}`)) {
        const r = cliRaw(args, extraEnv);
        if (r.status !== 0) throw new Error(`trackd ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
        return JSON.parse(r.stdout);
      }
      return runCommand(args, () => loadConfig({ ...process.env, ...env, ...extraEnv })).then((value) => JSON.parse(JSON.stringify(value)));
    },
    createOrg(name = 'Test Org') {
      return trackd.cli(['orgs', 'create', '--name', name]);
    },
    createKey(orgId, scopes = ALL_SCOPES, extra = []) {
      return trackd.cli(['keys', 'create', '--org', String(orgId), '--name', 'test', '--scopes', scopes.join(','), ...extra]);
    },
    async stop() {
      await service?.stop();
      service = undefined;
      return 0;
    },
    async restart() {
      await trackd.stop();
      service = await serve(config(), { logFile, clock: options.clock, recordDir: options.recordDir });
    },
    ownership() {
      const table = running().ownership;
      if (table === undefined) throw new Error('trackd is not in cluster mode (CLUSTER_NODE_ID)');
      return table;
    },
  };
  return trackd;
}

/** Starts `trackd serve` as a child process (signals, exit codes, stdout), on a free port with its own DATA_DIR and nats-server. */
export async function spawnTrackd(t: Teardown, options: StartOptions = {}): Promise<Trackd> {
  const { env, dataDir, natsUrl, release } = await testEnv(options);
  let { child, port, lines } = await launch(env).catch(async (err) => {
    await release();
    throw err;
  });
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      // A graceful stop: it takes an embedded nats-server down too, and writes coverage.
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }
    await release();
  });
  const cliRaw = cliProcess(env);
  const trackd: Trackd = {
    get port() {
      return port;
    },
    get baseUrl() {
      return `http://127.0.0.1:${port}`;
    },
    dataDir,
    natsUrl: natsUrl === 'embedded' ? fs.readFileSync(path.join(dataDir, 'nats.url'), 'utf8').trim() : natsUrl,
    env,
    get process() {
      return child;
    },
    logs: () => parseJsonLines(lines.join('\n')),
    request: (method, urlPath, opts) => overHttp(port, method, urlPath, opts),
    http: (method, urlPath, opts) => overHttp(port, method, urlPath, opts),
    cliRaw,
    async cli(args, extraEnv) {
      const r = cliRaw(args, extraEnv);
      if (r.status !== 0) throw new Error(`trackd ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
      return JSON.parse(r.stdout);
    },
    createOrg(name = 'Test Org') {
      return trackd.cli(['orgs', 'create', '--name', name]);
    },
    createKey(orgId, scopes = ALL_SCOPES, extra = []) {
      return trackd.cli(['keys', 'create', '--org', String(orgId), '--name', 'test', '--scopes', scopes.join(','), ...extra]);
    },
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      // 'close', not 'exit': by then every line the child printed has been read.
      const exited = new Promise<number | null>((r) => child.once('close', (code) => r(code)));
      child.kill(signal);
      return exited;
    },
    async restart() {
      await trackd.stop();
      ({ child, port, lines } = await launch(env));
    },
    ownership() {
      throw new Error('trackd runs as a child process: its ownership table is not reachable');
    },
  };
  return trackd;
}

/**
 * One request on its own connection. A pooled keep-alive socket goes stale while spawnSync (the CLI
 * helpers) blocks the event loop past the server's idle timeout, and the next request then fails
 * with 'other side closed'; a connection per request cannot.
 */
function httpRequest(port: number, method: string, urlPath: string, headers: Record<string, string>, body: string | Buffer | undefined) {
  const outgoing: Record<string, string> = { ...headers };
  if (body !== undefined) outgoing['content-length'] = String(Buffer.byteLength(body));
  else if (method === 'POST' || method === 'PUT' || method === 'PATCH') outgoing['content-length'] = '0';
  return new Promise<{ status: number; headers: Headers; text: string }>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: urlPath, headers: outgoing, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const responseHeaders = new Headers();
        for (const [name, value] of Object.entries(res.headers)) {
          if (value !== undefined) responseHeaders.set(name, Array.isArray(value) ? value.join(', ') : value);
        }
        resolve({ status: res.statusCode ?? 0, headers: responseHeaders, text: Buffer.concat(chunks).toString('utf8') });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Polls `check` until it returns a truthy value or the timeout passes. */
export async function eventually<T>(
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 5000,
  everyMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms${last ? `: ${(last as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
