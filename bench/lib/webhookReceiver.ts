/**
 * A webhook receiver on 127.0.0.1 in a worker thread (it answers 204 and records, per URL path,
 * the `seq` of every body it got), and its own rate as the ceiling of a delivery figure.
 */
import http from 'node:http';
import { Worker } from 'node:worker_threads';

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

export class Receiver {
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
  /** Resolves when the receiver holds `want` requests since its last reset (throws after `timeoutMs`). */
  async waitFor(want: number, timeoutMs: number): Promise<void> {
    const started = performance.now();
    for (;;) {
      const { total } = await this.ask<{ total: number }>('count');
      if (total >= want) return;
      if (performance.now() - started > timeoutMs) throw new Error(`only ${total} of ${want} deliveries in ${timeoutMs / 1000} s`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  /** Throws unless each path got exactly `perPath` deliveries, each the seq after the one before (first: `after` + 1). */
  async checkInOrder(perPath: number, after?: number): Promise<void> {
    const { seqs } = await this.ask<{ seqs: [string, number[]][] }>('seqs');
    for (const [url, list] of seqs) {
      const inOrder = list.every((s, i) => (i === 0 ? after === undefined || s === after + 1 : s === list[i - 1]! + 1));
      if (list.length !== perPath || !inOrder) throw new Error(`${url}: ${list.length} deliveries of ${perPath}, in order: ${inOrder}`);
    }
  }
  stop(): Promise<number> {
    return this.worker.terminate();
  }
}

/** The receiver's own rate: `connections` loops, each one POST after another, `perConnection` each. */
export async function receiverCeiling(port: number, connections: number, perConnection: number, body: string): Promise<number> {
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
