/**
 * Reads per CPU-second in cluster mode against one node (issue 12; this machine has 2 cores, so
 * throughput against N nodes can't be shown here: the cost of a read is compared instead).
 *
 * - single: one trackd (SHARDS=2, no cluster) on its own nats-server; every read goes to it.
 * - cluster: two trackd nodes on another nats-server, each serving one of the 2 shards
 *   (CLUSTER_STATIC_SHARDS); every read goes to a node chosen at random, as a load balancer in
 *   front of a cluster would send it, so about half of them are forwarded to the owner over NATS;
 *   and, in blocks of their own, every read sent to the node that owns its org (routed).
 *
 * Both set-ups run in this process (all their threads count in process.cpuUsage()) with their
 * nats-server's CPU time (/proc) added; they are measured in alternating blocks of the same
 * reads (one asset by id in each of two orgs, one org per shard), so a shared machine's drift
 * falls on both. Prints one JSON document: reads per CPU-second of each and cluster / single.
 *
 *   node dist/bench/probes/clusterReads.js [--blocks 6] [--requests 2000] [--concurrency 8]
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { runCommand } from '../../src/cli/commands.js';
import { loadConfig } from '../../src/config.js';
import { startNatsServer, type NatsServerProcess } from '../../src/nats/embedded.js';
import { serve } from '../../src/serve.js';

const { values } = parseArgs({
  options: { blocks: { type: 'string' }, requests: { type: 'string' }, concurrency: { type: 'string' } },
});
const BLOCKS = Number(values.blocks ?? 6);
const REQUESTS = Number(values.requests ?? 2000);
const CONCURRENCY = Number(values.concurrency ?? 8);

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'trackd-cluster-reads-'));
const TICK_MS = 1000 / 100;

/** A process's user + system CPU time in ms, from /proc (clock ticks of 10 ms). */
function processCpuMs(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
}

interface Setup {
  name: string;
  nats: NatsServerProcess;
  ports: number[];
  /** Each target's own port to send it to (reads routed to the owner), or undefined: a random port. */
  routed?: number[];
  targets: { url: string; token: string }[];
  stop(): Promise<void>;
}

const baseEnv = (nats: NatsServerProcess, dir: string, extra: Record<string, string>) => ({
  ...process.env,
  NATS_URL: nats.url,
  DATA_DIR: path.join(root, dir),
  PORT: '0',
  LOG_LEVEL: 'silent',
  SHARDS: '2',
  HTTP_THREADS: '1',
  ...extra,
});

/** Two orgs (one per shard), a key each, one asset each: the reads' targets. */
async function seed(env: NodeJS.ProcessEnv, port: number, waitPorts: number[]): Promise<{ url: string; token: string }[]> {
  const cli = async (args: string[]) => JSON.parse(JSON.stringify(await runCommand(args, () => loadConfig(env))));
  const targets = [];
  for (const name of ['first', 'second']) {
    const org = await cli(['orgs', 'create', '--name', name]);
    const { token } = await cli(['keys', 'create', '--org', String(org.id), '--name', 'probe', '--scopes', 'assets:read,assets:write']);
    for (const p of waitPorts)
      for (let i = 0; (await request(p, 'GET', '/api/v1/orgs/me', token)).status !== 200; i++) {
        if (i > 400) throw new Error(`port ${p} never learnt the key`);
        await new Promise((r) => setTimeout(r, 25));
      }
    const created = await request(port, 'POST', '/api/v1/assets', token, { name: `Probe ${name}`, metadata: { note: 'x'.repeat(200) } });
    if (created.status !== 201) throw new Error(`asset: ${created.status} ${created.text}`);
    targets.push({ url: `/api/v1/assets/${JSON.parse(created.text).data.id}`, token });
  }
  return targets;
}

async function singleNode(): Promise<Setup> {
  const nats = await startNatsServer({ storeDir: path.join(root, 'nats-single') });
  const env = baseEnv(nats, 'single', {});
  const node = await serve(loadConfig(env));
  return {
    name: 'single',
    nats,
    ports: [node.port],
    targets: await seed(env, node.port, [node.port]),
    async stop() {
      await node.stop();
      await nats.stop();
    },
  };
}

async function twoNodes(): Promise<Setup> {
  const nats = await startNatsServer({ storeDir: path.join(root, 'nats-cluster') });
  const env = (id: string, shard: number) => baseEnv(nats, id, { CLUSTER_NODE_ID: id, CLUSTER_STATIC_SHARDS: String(shard) });
  const a = await serve(loadConfig(env('node-a', 0)));
  const b = await serve(loadConfig(env('node-b', 1)));
  return {
    name: 'cluster',
    nats,
    ports: [a.port, b.port],
    // Org 1 lives on shard 0 (node A), org 2 on shard 1 (node B).
    routed: [a.port, b.port],
    targets: await seed(env('node-a', 0), a.port, [a.port, b.port]),
    async stop() {
      await b.stop();
      await a.stop();
      await nats.stop();
    },
  };
}

const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY * 2 });
function request(port: number, method: string, url: string, token: string, body?: unknown): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string | number> = { authorization: `Bearer ${token}` };
    if (data !== undefined) Object.assign(headers, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) });
    const req = http.request({ host: '127.0.0.1', port, path: url, method, agent, headers }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

/** REQUESTS reads, CONCURRENCY at a time, each to a random port of the set-up; its CPU ms (this process + its nats-server). */
async function block(setup: Setup, routed = false): Promise<number> {
  const cpuBefore = process.cpuUsage();
  const natsBefore = processCpuMs(setup.nats.pid);
  let next = 0;
  const worker = async () => {
    while (next < REQUESTS) {
      const i = next++;
      const target = setup.targets[i % setup.targets.length]!;
      const port = routed ? setup.routed![i % setup.targets.length]! : setup.ports[Math.floor(Math.random() * setup.ports.length)]!;
      const res = await request(port, 'GET', target.url, target.token);
      if (res.status !== 200) throw new Error(`${setup.name}: GET answered ${res.status}: ${res.text}`);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const cpu = process.cpuUsage(cpuBefore);
  return (cpu.user + cpu.system) / 1000 + processCpuMs(setup.nats.pid) - natsBefore;
}

const single = await singleNode();
const cluster = await twoNodes();
// The client's own CPU (this process sends the requests) is in both figures: measured alone below.
await block(single); // warm-up: caches, connections, JIT
await block(cluster);
await block(cluster, true);
const cpu = { single: 0, cluster: 0, routed: 0 };
for (let i = 0; i < BLOCKS; i++) {
  cpu.single += await block(single);
  cpu.cluster += await block(cluster);
  cpu.routed += await block(cluster, true);
}
const reads = BLOCKS * REQUESTS;
const perCpuSecond = (ms: number) => Math.round(reads / (ms / 1000));
const figures = {
  reads_each: reads,
  concurrency: CONCURRENCY,
  single_reads_per_cpu_second: perCpuSecond(cpu.single),
  cluster_reads_per_cpu_second: perCpuSecond(cpu.cluster),
  ratio: Math.round((cpu.single / cpu.cluster) * 100) / 100,
  cluster_routed_reads_per_cpu_second: perCpuSecond(cpu.routed),
  routed_ratio: Math.round((cpu.single / cpu.routed) * 100) / 100,
  note: 'CPU of this process (trackd threads and the HTTP client) plus its nats-server; cluster: each read to a random node (about half forwarded); cluster routed: each read to the node that owns its org',
  load_average: os.loadavg().map((x) => Math.round(x * 10) / 10),
};
console.log(JSON.stringify(figures, null, 2));
agent.destroy();
await cluster.stop();
await single.stop();
fs.rmSync(root, { recursive: true, force: true });
