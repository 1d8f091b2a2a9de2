/**
 * Start-up of `trackd serve` on an existing DATA_DIR (e.g. the large bench dataset kept with
 * `npm run bench -- --size large --keep`): the wall time from spawning the process to its
 * "listening" line, what each shard actor logged when it started (the report index's positions,
 * bytes and build time), and the process's resident memory once listening and after a settle (the
 * V8 heap figures of /metrics leave out the shard threads, which hold the index):
 *
 *   node dist/bench/probes/startup.js --data-dir DIR [--nats-dir DIR] [--starts 2] [--settle-s 5]
 *
 * `--nats-dir` reuses a JetStream store (the kept bench's `nats/`), else a fresh one is made.
 * Prints one JSON document.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { freePort } from '../../src/nats/embedded.js';
import { machine, ROOT, stopChild } from '../lib/processes.js';
import { PRODUCTION_ENV, startBenchNats } from '../lib/trackd.js';

const { values } = parseArgs({
  options: {
    'data-dir': { type: 'string' },
    'nats-dir': { type: 'string' },
    starts: { type: 'string', default: '2' },
    'settle-s': { type: 'string', default: '5' },
  },
});
const dataDir = values['data-dir'];
if (dataDir === undefined)
  throw new Error('usage: node dist/bench/probes/startup.js --data-dir DIR [--nats-dir DIR] [--starts N] [--settle-s S]');
const log = (text: string) => process.stderr.write(`[startup] ${text}\n`);

/** Resident set of a process in MB, from /proc (Linux). */
function rssMegabytes(pid: number): number | undefined {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB/m);
  return status ? Math.round(Number(status[1]) / 1024) : undefined;
}

interface Start {
  listening_ms: number;
  shard_actors: { shard: number; report_index: Record<string, number> }[];
  rss_mb_listening?: number;
  rss_mb_settled?: number;
  load_average_before?: number;
}

async function startOnce(natsUrl: string): Promise<Start> {
  const port = await freePort();
  const spawnedAt = performance.now();
  const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'trackd.js'), 'serve'], {
    env: { ...process.env, ...PRODUCTION_ENV, LOG_LEVEL: 'info', PORT: String(port), DATA_DIR: dataDir!, NATS_URL: natsUrl },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const actors: Start['shard_actors'] = [];
  let buffered = '';
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  try {
    const listeningMs = await new Promise<number>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`trackd exited with ${code}: ${stderr}`)));
      child.stdout!.on('data', (d: Buffer) => {
        buffered += d.toString();
        const lines = buffered.split('\n');
        buffered = lines.pop()!;
        for (const line of lines) {
          let entry: { msg?: string; shard?: number; report_index?: Record<string, number> };
          try {
            entry = JSON.parse(line);
          } catch {
            continue;
          }
          if (entry.msg === 'shard actor started') actors.push({ shard: entry.shard!, report_index: entry.report_index! });
          if (entry.msg === 'listening') resolve(performance.now() - spawnedAt);
        }
      });
    });
    const listening = rssMegabytes(child.pid!);
    await new Promise((r) => setTimeout(r, Number(values['settle-s']) * 1000));
    return {
      listening_ms: Math.round(listeningMs),
      shard_actors: actors,
      rss_mb_listening: listening,
      rss_mb_settled: rssMegabytes(child.pid!),
    };
  } finally {
    await stopChild(child);
  }
}

const natsDir = values['nats-dir'] ?? fs.mkdtempSync(path.join(os.tmpdir(), 'trackd-startup-nats-'));
const nats = await startBenchNats(natsDir);
try {
  const starts: Start[] = [];
  for (let i = 0; i < Number(values.starts); i++) {
    const load = os.loadavg()[0]!;
    const start = await startOnce(nats.url);
    log(`start ${i + 1}: listening in ${start.listening_ms} ms, rss ${start.rss_mb_listening} MB (load average ${load.toFixed(1)})`);
    starts.push({ ...start, load_average_before: Math.round(load * 10) / 10 });
  }
  process.stdout.write(
    `${JSON.stringify({ generated_at: new Date().toISOString(), machine: machine(), data_dir: dataDir, starts }, null, 2)}\n`,
  );
} finally {
  await nats.stop();
}
