/**
 * What shard RPC costs a read (docs/cluster.md, "Any node answers"): two trackd nodes in cluster
 * mode on one nats-server, in this process, node A serving the org's shard. The same GET of one
 * asset, one request at a time over HTTP, to node A (local: the ceiling) and to node B (forwarded
 * over NATS to A), in alternating blocks so that a shared machine's drift falls on both:
 *
 *   node dist/bench/probes/forwarding.js [--blocks 6] [--requests 500]
 *
 * Prints one JSON document: p50 and p99 (ms) of each, forwarded / local, and the CPU ms per request
 * of each (this process, where both nodes and the client run, plus the nats-server).
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { runCommand } from '../../src/cli/commands.js';
import { loadConfig } from '../../src/config.js';
import { startNatsServer } from '../../src/nats/embedded.js';
import { serve } from '../../src/serve.js';

const { values } = parseArgs({ options: { blocks: { type: 'string' }, requests: { type: 'string' } } });
const BLOCKS = Number(values.blocks ?? 6);
const REQUESTS = Number(values.requests ?? 500);

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'trackd-forwarding-'));
const nats = await startNatsServer({ storeDir: path.join(root, 'nats') });
const env = (id: string, shard: number) => ({
  ...process.env,
  NATS_URL: nats.url,
  DATA_DIR: path.join(root, id),
  PORT: '0',
  LOG_LEVEL: 'silent',
  SHARDS: '2',
  HTTP_THREADS: '1',
  CLUSTER_NODE_ID: id,
  CLUSTER_STATIC_SHARDS: String(shard),
});
const a = await serve(loadConfig(env('node-a', 0)));
const b = await serve(loadConfig(env('node-b', 1)));
const cli = async (args: string[]) => JSON.parse(JSON.stringify(await runCommand(args, () => loadConfig(env('node-a', 0)))));

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
function get(port: number, url: string, token: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: url, agent, headers: { authorization: `Bearer ${token}` } }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end();
  });
}
function post(port: number, url: string, token: string, body: unknown): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) };
    const req = http.request({ host: '127.0.0.1', port, path: url, method: 'POST', agent, headers }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

const org = await cli(['orgs', 'create', '--name', 'probe']); // org 1: shard 0, node A's
const { token } = await cli(['keys', 'create', '--org', String(org.id), '--name', 'probe', '--scopes', 'assets:read,assets:write']);
for (let i = 0; ; i++) {
  if ((await get(b.port, '/api/v1/orgs/me', token)).status === 200) break;
  if (i > 200) throw new Error('node B never learnt the key');
  await new Promise((r) => setTimeout(r, 25));
}
const created = await post(a.port, '/api/v1/assets', token, { name: 'Probe', external_key: 'P-1', metadata: { note: 'x'.repeat(200) } });
const url = `/api/v1/assets/${JSON.parse(created.text).data.id}`;

const cpuMs = { local: 0, forwarded: 0 };
/** This process's CPU (both nodes' threads and the client) plus the nats-server's, in ms. */
function cpuNow(): number {
  const own = process.cpuUsage();
  const fields = fs.readFileSync(`/proc/${nats.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (own.user + own.system) / 1000 + (Number(fields[11]) + Number(fields[12])) * 10;
}

async function block(port: number): Promise<number[]> {
  const ms: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    const started = performance.now();
    const res = await get(port, url, token);
    ms.push(performance.now() - started);
    if (res.status !== 200) throw new Error(`GET answered ${res.status}: ${res.text}`);
  }
  return ms;
}
await block(a.port); // warm-up: caches, connections, JIT
await block(b.port);
const local: number[] = [];
const forwarded: number[] = [];
for (let i = 0; i < BLOCKS; i++) {
  let started = cpuNow();
  local.push(...(await block(a.port)));
  cpuMs.local += cpuNow() - started;
  started = cpuNow();
  forwarded.push(...(await block(b.port)));
  cpuMs.forwarded += cpuNow() - started;
}
const quantile = (xs: number[], q: number) => {
  const sorted = [...xs].sort((x, y) => x - y);
  return Math.round(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! * 1000) / 1000;
};
const figures = {
  requests_each: local.length,
  local_ms: { p50: quantile(local, 0.5), p99: quantile(local, 0.99) },
  forwarded_ms: { p50: quantile(forwarded, 0.5), p99: quantile(forwarded, 0.99) },
  ratio: {
    p50: Math.round((quantile(forwarded, 0.5) / quantile(local, 0.5)) * 100) / 100,
    p99: Math.round((quantile(forwarded, 0.99) / quantile(local, 0.99)) * 100) / 100,
  },
  cpu_ms_per_request: {
    local: Math.round((cpuMs.local / local.length) * 1000) / 1000,
    forwarded: Math.round((cpuMs.forwarded / forwarded.length) * 1000) / 1000,
  },
  load_average: os.loadavg().map((x) => Math.round(x * 10) / 10),
};
console.log(JSON.stringify(figures, null, 2));
agent.destroy();
await b.stop();
await a.stop();
await nats.stop();
fs.rmSync(root, { recursive: true, force: true });
