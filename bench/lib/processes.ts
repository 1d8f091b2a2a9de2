import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** dist/bench, where the compiled harness lives. */
export const BENCH_DIST = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** The repository root (dist/bench/lib -> ../../..). */
export const ROOT = path.resolve(BENCH_DIST, '../..');

/** Runs a compiled bench script in its own node process; resolves with the JSON of its last stdout line. */
export function runJsonProcess<T>(script: string, args: string[], env: Record<string, string> = {}, nodeArgs: string[] = []): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeArgs, path.join(BENCH_DIST, script), ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', reject);
    child.once('exit', (code) => {
      const last = stdout.trim().split('\n').pop() ?? '';
      if (code !== 0) return reject(new Error(`${script} exited with ${code}: ${stderr.trim().split('\n').slice(-5).join(' | ')}`));
      try {
        resolve(JSON.parse(last) as T);
      } catch {
        reject(new Error(`${script} printed no JSON result: ${stdout.slice(-500)} ${stderr.slice(-500)}`));
      }
    });
  });
}

/** Writes a JSON spec to a temp file for a child process to read (specs can hold thousands of paths). */
export function writeSpec(dir: string, name: string, spec: unknown): string {
  const file = path.join(dir, `${name}-${process.hrtime.bigint()}.json`);
  fs.writeFileSync(file, JSON.stringify(spec));
  return file;
}

/** Starts a long-lived child that prints a JSON line `{"ready":true,"port":N}` when it serves. */
export function startServerProcess(
  script: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ child: ChildProcess; port: number; stop(): Promise<void> }> {
  return new Promise((resolve, reject) => {
    // stdin stays open: the server exits when it closes (this process died).
    const child = spawn(process.execPath, [path.join(BENCH_DIST, script), ...args], {
      env: { ...process.env, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let buffer = '';
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => reject(new Error(`${script} did not start: ${stderr}`)), 60_000);
    child.stdout!.on('data', (d: Buffer) => {
      buffer += d.toString();
      const line = buffer.split('\n').find((l) => l.includes('"ready":true'));
      if (line === undefined) return;
      clearTimeout(timer);
      const port = (JSON.parse(line) as { port: number }).port;
      resolve({ child, port, stop: () => stopChild(child) });
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${script} exited with ${code}: ${stderr}`));
    });
  });
}

export async function stopChild(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), 12_000);
  await exited;
  clearTimeout(timer);
}

export function machine() {
  const cpus = os.cpus();
  return {
    cpus: cpus.length,
    cpu_model: cpus[0]?.model ?? 'unknown',
    memory_gib: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    load_average: os.loadavg().map((x) => Math.round(x * 100) / 100),
    platform: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
  };
}

/** Installed versions of the dependencies whose speed the figures depend on. */
export function versions(): Record<string, string> {
  const names = [
    'uWebSockets.js',
    'better-sqlite3',
    'knex',
    '@nats-io/transport-node',
    '@nats-io/jetstream',
    'jose',
    'ajv',
    'pino',
    'fastify',
    'autocannon',
  ];
  const out: Record<string, string> = {};
  for (const name of names) {
    try {
      const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as {
        name: string;
        version: string;
      };
      out[name] = name === pkg.name ? pkg.version : `${pkg.name}@${pkg.version}`;
    } catch {
      out[name] = 'missing';
    }
  }
  return out;
}
