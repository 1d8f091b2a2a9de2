import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { freePort, startNatsServer, type NatsServerProcess } from '../../src/nats/embedded.js';
import { ROOT, stopChild } from './processes.js';

const BIN = path.join(ROOT, 'bin', 'trackd.js');

/**
 * Production settings for the measured server; the rate limit is lifted so that it never answers
 * 429, and webhook receivers on loopback are allowed (the webhook scenarios' receiver).
 */
export const PRODUCTION_ENV = {
  LOG_LEVEL: 'warn',
  TRACKD_ENV: 'production',
  RATE_LIMIT_PER_MIN: '100000000',
  TRACKD_BENCH_ROUTES: '1',
  WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32',
};

export interface TrackdOptions {
  dataDir: string;
  natsUrl: string;
  env?: Record<string, string>;
  /** Extra node flags, e.g. --cpu-prof. */
  nodeArgs?: string[];
  /** Another build's bin/trackd.js (a before/after run of two worktrees); this build's by default. */
  bin?: string;
}

/** `trackd serve` as a child process, the way an operator runs it. */
export class TrackdProcess {
  private constructor(
    readonly child: ChildProcess,
    readonly port: number,
    readonly env: Record<string, string>,
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /**
   * At LOG_LEVEL=warn the "listening" line (info) is not printed, so the harness picks a free port
   * itself and waits for /readyz.
   */
  static async start(options: TrackdOptions): Promise<TrackdProcess> {
    const port = await freePort();
    const env = { ...PRODUCTION_ENV, PORT: String(port), DATA_DIR: options.dataDir, NATS_URL: options.natsUrl, ...options.env };
    const child = spawn(process.execPath, [...(options.nodeArgs ?? []), options.bin ?? BIN, 'serve'], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    // The last lines it printed (warnings and errors at LOG_LEVEL=warn), for when it dies.
    const keep = (d: Buffer) => {
      output = (output + d.toString()).slice(-50_000);
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`trackd exited with ${child.exitCode}: ${output.slice(-2000)}`);
      try {
        const res = await fetch(`http://127.0.0.1:${port}/readyz`);
        if (res.status === 200) break;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`trackd not ready within 60 s: ${output.slice(-2000)}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    const started = new TrackdProcess(child, port, env);
    child.once('exit', (code, signal) => {
      if (!started.stopping) process.stderr.write(`[bench] trackd exited unexpectedly (${signal ?? code}): ${output.slice(-4000)}\n`);
    });
    return started;
  }

  private stopping = false;

  stop(): Promise<void> {
    this.stopping = true;
    return stopChild(this.child);
  }
}

/** Runs the operator CLI against a DATA_DIR; returns its parsed JSON output. */
export function trackdCli(dataDir: string, args: string[], env: Record<string, string> = {}): any {
  const r = spawnSync(process.execPath, [BIN, ...args], {
    env: { ...process.env, ...PRODUCTION_ENV, DATA_DIR: dataDir, ...env },
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`trackd ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
  return JSON.parse(r.stdout);
}

export const ALL_SCOPES = 'assets:read,assets:write,locations:read,locations:write,tracking:read';

/** Mints `count` production keys with every integrator scope; requests draw among them at random. */
export function mintKeys(dataDir: string, orgId: number, count: number): string[] {
  const tokens: string[] = [];
  for (let i = 0; i < count; i++) {
    const key = trackdCli(dataDir, [
      'keys',
      'create',
      '--org',
      String(orgId),
      '--name',
      `bench-${i}`,
      '--scopes',
      ALL_SCOPES,
      '--env',
      'production',
    ]);
    tokens.push(key.token as string);
  }
  return tokens;
}

export async function startBenchNats(storeDir: string): Promise<NatsServerProcess> {
  return startNatsServer({ storeDir, serverName: `bench-${path.basename(path.dirname(storeDir))}` });
}
