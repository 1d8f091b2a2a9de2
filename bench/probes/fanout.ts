/**
 * What streaming to many clients costs trackd in CPU time, per delivery (issue 15: 1,000 stream
 * clients while reads are served). Wall-clock rates on this shared 2-core machine move with the other
 * sessions' load; the CPU a process spends on the same work moves much less, so builds are compared here:
 *
 *   node dist/bench/probes/fanout.js [--clients 1000] [--seconds 10] [--rate 50] [--rounds 2] [--out FILE]
 *
 * trackd runs as `npm run bench` starts it (production settings, default layout). Each round has two
 * phases of `--seconds`, each with the same paced writes (`--rate` asset creates a second, one event
 * each): first no stream client, then `--clients` clients (half Server-Sent Events, half WebSocket,
 * `bench/lib/eventClients.ts`, its own process) streaming every event. Measured per phase: trackd's
 * CPU (user + system, /proc) and the clients process's; the difference of trackd's between the
 * phases over the deliveries is what a delivery costs it. Every client must get every event once,
 * in order. Prints one JSON document and writes it to --out.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { checkComplete, openEventClients } from '../lib/eventStreams.js';
import { machine, ROOT } from '../lib/processes.js';
import type { BenchContext } from '../lib/scenario.js';
import { mintKeys, startBenchNats, TrackdProcess, trackdCli } from '../lib/trackd.js';

const { values } = parseArgs({
  options: {
    clients: { type: 'string' },
    seconds: { type: 'string' },
    rate: { type: 'string' },
    rounds: { type: 'string' },
    out: { type: 'string' },
  },
});
const CLIENTS = Number(values.clients ?? 1_000);
const SECONDS = Number(values.seconds ?? 10);
const RATE = Number(values.rate ?? 50);
const ROUNDS = Number(values.rounds ?? 2);
const OUT = values.out ?? path.join(ROOT, 'bench', 'results', 'fanout-cpu.json');
const TICKS_PER_SECOND = 100;

/** CPU seconds (user + system) a process has used so far. */
function cpuSeconds(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
}

async function head(base: string, token: string): Promise<number> {
  const res = await fetch(`${base}/api/v1/events?limit=1`, { headers: { authorization: `Bearer ${token}` } });
  return ((await res.json()) as { last_seq: number }).last_seq;
}

/** `RATE` asset creates a second for `SECONDS`, each sent on time (one after another). */
async function pacedCreates(base: string, token: string, prefix: string): Promise<number> {
  const count = Math.round(RATE * SECONDS);
  const start = performance.now();
  for (let i = 0; i < count; i++) {
    const due = start + (i * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const res = await fetch(`${base}/api/v1/assets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ external_key: `${prefix}-${i}`, name: `Fan-out ${i}` }),
    });
    if (res.status !== 201) throw new Error(`POST /api/v1/assets: ${res.status} ${await res.text()}`);
  }
  return count;
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'trackd-fanout-probe-'));
const dataDir = path.join(work, 'data');
fs.mkdirSync(dataDir);
const nats = await startBenchNats(path.join(work, 'nats'));
try {
  const org = trackdCli(dataDir, ['orgs', 'create', '--name', 'fanout']) as { id: number };
  const tokens = mintKeys(dataDir, org.id, 1);
  const trackd = await TrackdProcess.start({ dataDir, natsUrl: nats.url });
  const pid = trackd.child.pid!;
  const ctx = { trackd, tokens, workDir: work } as unknown as BenchContext;
  const rounds: Record<string, number>[] = [];
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      const before = cpuSeconds(pid);
      await pacedCreates(trackd.url, tokens[0]!, `r${round}-alone`);
      const aloneCpu = cpuSeconds(pid) - before;
      const after = await head(trackd.url, tokens[0]!);
      const clients = await openEventClients(ctx, { sse: CLIENTS / 2, ws: CLIENTS / 2, latencyClients: 5, after });
      try {
        const start = cpuSeconds(pid);
        const events = await pacedCreates(trackd.url, tokens[0]!, `r${round}-streamed`);
        const got = await clients.finish(await head(trackd.url, tokens[0]!));
        const streamedCpu = cpuSeconds(pid) - start;
        checkComplete('fanout probe', got);
        const deliveries = got.expected_per_client * got.clients;
        rounds.push({
          events,
          deliveries,
          trackd_cpu_s_alone: Math.round(aloneCpu * 100) / 100,
          trackd_cpu_s_streamed: Math.round(streamedCpu * 100) / 100,
          trackd_us_per_delivery: Math.round(((streamedCpu - aloneCpu) / deliveries) * 1e7) / 10,
          clients_busy_cores: got.busy_cores,
          delivery_p50_ms: got.latency.p50,
          delivery_p99_ms: got.latency.p99,
          load_average_1m: Math.round(os.loadavg()[0]! * 10) / 10,
        });
        process.stderr.write(`[fanout] round ${round}: ${JSON.stringify(rounds.at(-1))}\n`);
      } finally {
        await clients.stop();
      }
    }
  } finally {
    await trackd.stop();
  }
  const output = {
    generated_at: new Date().toISOString(),
    command: `node dist/bench/probes/fanout.js ${process.argv.slice(2).join(' ')}`.trim(),
    machine: machine(),
    settings: { clients: CLIENTS, seconds: SECONDS, creates_per_s: RATE },
    rounds,
  };
  fs.mkdirSync(path.dirname(OUT), { recursive: true });
  fs.writeFileSync(OUT, `${JSON.stringify(output, null, 2)}\n`);
  process.stdout.write(`${JSON.stringify(output)}\n`);
} finally {
  await nats.stop();
  fs.rmSync(work, { recursive: true, force: true });
}
