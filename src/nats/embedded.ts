import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

const CANDIDATES = ['nats-server', '/usr/sbin/nats-server', '/usr/bin/nats-server', '/usr/local/bin/nats-server'];

/** Locates the nats-server binary, or throws a one-line message saying how to install it. */
export function findNatsServer(): string {
  for (const candidate of CANDIDATES) {
    if (candidate.includes('/')) {
      if (fs.existsSync(candidate)) return candidate;
      continue;
    }
    for (const dir of (process.env.PATH ?? '').split(':')) {
      const full = path.join(dir, candidate);
      if (dir !== '' && fs.existsSync(full)) return full;
    }
  }
  throw new Error('nats-server not found: install it (Debian: apt-get install -y nats-server) or set NATS_URL to an existing server');
}

export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, host, () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

function waitForPort(port: number, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const attempt = () => {
      if (child.exitCode !== null) return reject(new Error(`nats-server exited with code ${child.exitCode}`));
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve();
      });
      socket.once('error', () => {
        socket.destroy();
        if (Date.now() > deadline) reject(new Error(`nats-server did not listen on ${port} within ${timeoutMs} ms`));
        else setTimeout(attempt, 50);
      });
    };
    attempt();
  });
}

export interface NatsServerProcess {
  url: string;
  port: number;
  mqttPort: number | undefined;
  storeDir: string;
  /** The server's process id (probes read its CPU time). */
  pid: number;
  /** Sends the server a signal (tests: kill -9 a cluster member). */
  kill(signal: NodeJS.Signals): void;
  stop(): Promise<void>;
}

export interface NatsServerOptions {
  storeDir: string;
  port?: number;
  /** Also open the MQTT listener (JetStream-backed; needs server_name) on this port (0: a free one). */
  mqttPort?: number;
  serverName?: string;
  /** More lines of configuration (tests: a `cluster {}` block). */
  extraConfig?: string[];
}

/** Starts `nats-server -js` on loopback with a file store; used for the embedded server and by tests. */
export async function startNatsServer(options: NatsServerOptions): Promise<NatsServerProcess> {
  const binary = findNatsServer();
  fs.mkdirSync(options.storeDir, { recursive: true });
  const port = options.port || (await freePort());
  const mqttPort = options.mqttPort === undefined ? undefined : options.mqttPort || (await freePort());
  const lines = [
    `server_name: "${options.serverName ?? 'trackd'}"`,
    `listen: "127.0.0.1:${port}"`,
    `jetstream { store_dir: ${JSON.stringify(options.storeDir)} }`,
    // A shard's journal entry holds a write's arguments whole: room for a 1 MiB request body and more.
    'max_payload: 8388608',
  ];
  if (mqttPort !== undefined) lines.push(`mqtt { listen: "127.0.0.1:${mqttPort}" }`);
  lines.push(...(options.extraConfig ?? []));
  const configFile = path.join(options.storeDir, 'nats-server.conf');
  fs.writeFileSync(configFile, `${lines.join('\n')}\n`);
  const child = spawn(binary, ['-c', configFile], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    if (stderr.length < 20_000) stderr += d.toString();
  });
  try {
    await waitForPort(port, child, 15_000);
    if (mqttPort !== undefined) await waitForPort(mqttPort, child, 15_000);
  } catch (err) {
    child.kill('SIGKILL');
    throw new Error(`${(err as Error).message}: ${stderr.split('\n').filter(Boolean).slice(-3).join(' | ')}`);
  }
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    mqttPort,
    storeDir: options.storeDir,
    pid: child.pid ?? 0,
    kill(signal) {
      child.kill(signal);
    },
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}
