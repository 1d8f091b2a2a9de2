/**
 * Webhook deliveries per second to a local receiver (issue 15, point 3), beside a ceiling measured in the same run:
 *
 *   node dist/bench/probes/webhooks.js [--events 20000] [--endpoints 1,4] [--out bench/results/webhooks.json]
 *
 * - trackd: a `trackd serve` child (production settings, one shard, one HTTP thread). For each endpoint
 *   count E: E webhooks on `asset.created` to a receiver on 127.0.0.1, paused; a bulk import of
 *   `events` assets (one asset.created each); then all resumed at once, timed until the receiver holds
 *   events x E deliveries. Checked: each endpoint got every sequence once, in order.
 * - ceiling: the receiver's own max rate: this process POSTs the same body and headers to it, E
 *   connections each sending one request after another (as the dispatcher does per endpoint).
 * The receiver runs in a worker thread of this process (it answers 204 and records what it got).
 * Prints one JSON document and writes it to --out.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { machine, ROOT } from '../lib/processes.js';
import { startBenchNats, TrackdProcess } from '../lib/trackd.js';

const { values } = parseArgs({ options: { events: { type: 'string' }, endpoints: { type: 'string' }, out: { type: 'string' } } });
const EVENTS = Number(values.events ?? 20_000);
const ENDPOINTS = (values.endpoints ?? '1,4').split(',').map(Number);
const OUT = values.out ?? path.join(ROOT, 'bench', 'results', 'webhooks.json');
const BIN = path.join(ROOT, 'bin', 'trackd.js');

const RECEIVER = `
const http = require('node:http');
const { parentPort } = require('node:worker_threads');
const seqs = new Map();
let total = 0;
const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    const m = /"seq":(\\d+)/.exec(body);
    let list = seqs.get(req.url);
    if (list === undefined) seqs.set(req.url, (list = []));
    if (m) list.push(Number(m[1]));
    total++;
    res.writeHead(204);
    res.end();
  });
});
server.keepAliveTimeout = 30000;
server.listen(0, '127.0.0.1', () => parentPort.postMessage({ port: server.address().port }));
parentPort.on('message', (m) => {
  if (m === 'count') parentPort.postMessage({ total });
  else if (m === 'reset') { seqs.clear(); total = 0; parentPort.postMessage({ total }); }
  else if (m === 'seqs') parentPort.postMessage({ seqs: [...seqs] });
});
`;

class Receiver {
  private constructor(
    private readonly worker: Worker,
    readonly port: number,
  ) {}
  static async start(): Promise<Receiver> {
    const worker = new Worker(RECEIVER, { eval: true });
    const { port } = await new Promise<{ port: number }>((r) => worker.once('message', r));
    return new Receiver(worker, port);
  }
  ask<T>(message: string): Promise<T> {
    return new Promise<T>((r) => {
      this.worker.once('message', r);
      this.worker.postMessage(message);
    });
  }
  stop(): Promise<number> {
    return this.worker.terminate();
  }
}

function cli(dataDir: string, args: string[]): any {
  const r = spawnSync(process.execPath, [BIN, ...args], { env: { ...process.env, DATA_DIR: dataDir }, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`trackd ${args.join(' ')}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

async function call(base: string, token: string, method: string, urlPath: string, body?: unknown, contentType = 'application/json') {
  const res = await fetch(`${base}${urlPath}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': contentType }) },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${urlPath}: ${res.status} ${text}`);
  return text === '' ? undefined : JSON.parse(text);
}

async function importAssets(base: string, token: string, round: number): Promise<void> {
  let csv = 'external_key,name\n';
  for (let i = 1; i <= EVENTS; i++) csv += `R${round}-${i},Asset ${i}\n`;
  const accepted = await call(base, token, 'POST', '/api/v1/assets/bulk?mode=create', csv, 'text/csv');
  for (;;) {
    const job = (await call(base, token, 'GET', accepted.status_url)).data;
    if (job.status === 'completed') return;
    if (job.status === 'failed') throw new Error(`import failed: ${JSON.stringify(job)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The receiver's own rate: `connections` loops, each one POST after another, `perConnection` each. */
async function ceiling(port: number, connections: number, perConnection: number, body: string): Promise<number> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const headers = {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(body)),
    'user-agent': 'trackd-webhooks',
    'webhook-id': '01KAVXY0000000000000000000',
    'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
    'webhook-signature': `v1,${Buffer.alloc(32, 1).toString('base64')}`,
  };
  const one = (i: number) =>
    new Promise<void>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, path: `/ceiling${i}`, method: 'POST', agent, headers }, (res) => {
        res.resume();
        res.on('end', () => resolve());
      });
      req.on('error', reject);
      req.end(body);
    });
  const started = performance.now();
  await Promise.all(
    Array.from({ length: connections }, async (_, i) => {
      for (let n = 0; n < perConnection; n++) await one(i);
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  return (connections * perConnection) / seconds;
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'trackd-webhooks-bench-'));
const receiver = await Receiver.start();
try {
  const dataDir = path.join(work, 'data');
  fs.mkdirSync(dataDir);
  const nats = await startBenchNats(path.join(work, 'nats'));
  const org = cli(dataDir, ['orgs', 'create', '--name', 'bench']);
  const scopes = 'assets:read,assets:write,webhooks:read,webhooks:write';
  const { token } = cli(dataDir, ['keys', 'create', '--org', String(org.id), '--name', 'bench', '--scopes', scopes, '--env', 'production']);
  const trackd = await TrackdProcess.start({
    dataDir,
    natsUrl: nats.url,
    env: { SHARDS: '1', HTTP_THREADS: '1', WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32' },
  });
  const runs: Record<string, unknown>[] = [];
  let sampleBody = '';
  try {
    for (const [round, endpoints] of ENDPOINTS.entries()) {
      const hooks = [];
      for (let e = 0; e < endpoints; e++) {
        const hook = (
          await call(trackd.url, token, 'POST', '/api/v1/webhooks', {
            url: `http://127.0.0.1:${receiver.port}/e${e}`,
            event_types: ['asset.created'],
          })
        ).data;
        await call(trackd.url, token, 'PATCH', `/api/v1/webhooks/${hook.id}`, { status: 'paused' }, 'application/merge-patch+json');
        hooks.push(hook);
      }
      await importAssets(trackd.url, token, round);
      await receiver.ask('reset');
      const started = performance.now();
      for (const hook of hooks)
        await call(trackd.url, token, 'PATCH', `/api/v1/webhooks/${hook.id}`, { status: 'active' }, 'application/merge-patch+json');
      const want = EVENTS * endpoints;
      for (;;) {
        const { total } = await receiver.ask<{ total: number }>('count');
        if (total >= want) break;
        if (performance.now() - started > 600_000) throw new Error(`only ${total} of ${want} deliveries in 10 minutes`);
        await new Promise((r) => setTimeout(r, 20));
      }
      const seconds = (performance.now() - started) / 1000;
      const { seqs } = await receiver.ask<{ seqs: [string, number[]][] }>('seqs');
      for (const [url, list] of seqs) {
        const inOrder = list.every((s, i) => i === 0 || s === list[i - 1]! + 1);
        if (list.length !== EVENTS || !inOrder) throw new Error(`${url}: ${list.length} deliveries, in order: ${inOrder}`);
      }
      const page = await call(trackd.url, token, 'GET', `/api/v1/events?after=0&limit=1`);
      sampleBody = JSON.stringify(page.data[0]);
      const ceilingRate = await ceiling(receiver.port, endpoints, Math.min(EVENTS, 20_000), sampleBody);
      const rate = want / seconds;
      runs.push({
        endpoints,
        deliveries: want,
        seconds: Math.round(seconds * 100) / 100,
        deliveries_per_s: Math.round(rate),
        ceiling_receiver_per_s: Math.round(ceilingRate),
        ratio: Math.round((rate / ceilingRate) * 100) / 100,
        every_endpoint_in_order_none_lost: true,
      });
      for (const hook of hooks) await call(trackd.url, token, 'DELETE', `/api/v1/webhooks/${hook.id}`);
    }
  } finally {
    await trackd.stop();
    await nats.stop();
  }
  const result = {
    probe: 'webhooks',
    events: EVENTS,
    body_bytes: Buffer.byteLength(sampleBody),
    machine: machine(),
    load_average: os.loadavg().map((x) => Math.round(x * 10) / 10),
    runs,
  };
  const text = `${JSON.stringify(result, null, 2)}\n`;
  fs.writeFileSync(OUT, text);
  process.stdout.write(text);
} finally {
  await receiver.stop();
  fs.rmSync(work, { recursive: true, force: true });
}
