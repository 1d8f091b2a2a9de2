/**
 * Event stream clients in their own process: `sse` Server-Sent Events streams and `ws` WebSocket
 * subscriptions, all opened after `after` on one organization with no filter. Prints
 * `{"ready":true,"port":0}` once every client is open (SSE: the 200 arrived; WebSocket: `subscribed`
 * came back), then waits for a line `{"until":SEQ,"measureAfter":SEQ0}` on stdin and for every client
 * to hold every sequence up to SEQ; prints the result and exits. Latency figures are over the events
 * after SEQ0 (the warm-up's events before it are summarized apart).
 *
 * Checked per client: each event's seq is the one after the previous (no gap, no repeat). Latency:
 * the time an event arrived minus its `occurred_at` (for a move, the JetStream time of the scan
 * that made it: published to received), on the first `latencyClients` clients (the rest only count,
 * to keep this process from being the bottleneck).
 */
import fs from 'node:fs';
import http from 'node:http';
import readline from 'node:readline';
import WebSocket from 'ws';
import { specArg } from './args.js';
import { summarize } from './loadSpec.js';

export interface EventClientsSpec {
  url: string;
  token: string;
  after: number;
  sse: number;
  ws: number;
  latencyClients: number;
  /** How long to wait for the last events after `until` is known. */
  timeoutMs: number;
  /** Report `arrivals` (the stage breakdown, eventStages.ts): for each event time, its first arrival and its events. */
  arrivals?: boolean;
}

export interface EventClientsResult {
  clients: number;
  sse: number;
  ws: number;
  expected_per_client: number;
  /** Clients that got every event after `after` up to `until`, each once, in order. */
  complete: number;
  min_received: number;
  max_received: number;
  out_of_order: number;
  closed_early: number;
  /** CPU this process used from the moment every client was open to the last event, in cores. */
  busy_cores: number;
  latency: { p50: number; p99: number; max: number; mean: number; count: number };
  /** The same over the warm-up's events (up to `measureAfter`), when there was one. */
  warmup_latency?: { p50: number; p99: number; max: number; mean: number; count: number };
  /** With `arrivals`: [occurred_at ms, first arrival ms, events] over the measured clients. */
  arrivals?: [number, number, number][];
}

interface Client {
  last: number;
  received: number;
  outOfOrder: number;
  closed: boolean;
}

const spec = JSON.parse(fs.readFileSync(specArg(), 'utf8')) as EventClientsSpec;
const clients: Client[] = [];
const latencies = new Float64Array(4_000_000);
const latencySeqs = new Float64Array(latencies.length);
let latencyCount = 0;
const arrivals = new Map<number, [number, number]>();
const SEQ = /"seq":(\d+)/;
const OCCURRED = /"occurred_at":"([^"]+)"/;

function receive(client: Client, seq: number, text: string | undefined, at: number): void {
  if (seq !== client.last + 1) client.outOfOrder++;
  client.last = seq;
  client.received++;
  if (text === undefined || latencyCount >= latencies.length) return;
  const occurred = OCCURRED.exec(text);
  if (occurred === null) return;
  const time = Date.parse(occurred[1]!);
  latencySeqs[latencyCount] = seq;
  latencies[latencyCount++] = at - time;
  if (!spec.arrivals) return;
  const seen = arrivals.get(time);
  if (seen === undefined) arrivals.set(time, [at, 1]);
  else seen[1]++;
}

function openSse(measure: boolean): Promise<Client> {
  const client: Client = { last: spec.after, received: 0, outOfOrder: 0, closed: false };
  const url = new URL(`/api/v1/events/stream?after=${spec.after}`, spec.url);
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false, headers: { authorization: `Bearer ${spec.token}`, accept: 'text/event-stream' } }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`SSE answered ${res.statusCode}`));
      res.setEncoding('utf8');
      let buffer = '';
      res.on('data', (chunk: string) => {
        const at = Date.now();
        buffer += chunk;
        let end = buffer.indexOf('\n\n');
        while (end !== -1) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          end = buffer.indexOf('\n\n');
          if (!frame.startsWith('id: ')) continue;
          receive(client, Number(frame.slice(4, frame.indexOf('\n'))), measure ? frame : undefined, at);
        }
      });
      res.on('close', () => {
        client.closed = true;
      });
      resolve(client);
    });
    req.on('error', reject);
  });
}

function openWs(measure: boolean): Promise<Client> {
  const client: Client = { last: spec.after, received: 0, outOfOrder: 0, closed: false };
  const ws = new WebSocket(`${spec.url.replace(/^http/, 'ws')}/api/v1/events/ws`, { headers: { authorization: `Bearer ${spec.token}` } });
  return new Promise((resolve, reject) => {
    ws.on('error', reject);
    ws.on('open', () => ws.send(JSON.stringify({ op: 'subscribe', id: 'b', after: spec.after })));
    ws.on('close', () => {
      client.closed = true;
    });
    ws.on('message', (data) => {
      const at = Date.now();
      const text = data.toString();
      if (text.startsWith('{"op":"event"')) {
        receive(client, Number(SEQ.exec(text)![1]), measure ? text : undefined, at);
      } else if (text.startsWith('{"op":"subscribed"')) resolve(client);
      else reject(new Error(`WebSocket said ${text.slice(0, 300)}`));
    });
  });
}

// Opened in slices: a thousand handshakes at once would only queue in the kernel.
const SLICE = 50;
for (let i = 0; i < spec.sse + spec.ws; i += SLICE) {
  const slice: Promise<Client>[] = [];
  for (let j = i; j < Math.min(i + SLICE, spec.sse + spec.ws); j++) {
    const measure = j < spec.latencyClients || (j >= spec.sse && j - spec.sse < spec.latencyClients);
    slice.push(j < spec.sse ? openSse(measure) : openWs(measure));
  }
  clients.push(...(await Promise.all(slice)));
}
process.stdout.write(`${JSON.stringify({ ready: true, port: 0 })}\n`);
const readyAt = performance.now();
const cpuAtReady = process.cpuUsage();

const lines = readline.createInterface({ input: process.stdin });
const { until, measureAfter } = await new Promise<{ until: number; measureAfter: number }>((resolve) => {
  lines.on('line', (line) => {
    const m = JSON.parse(line) as { until?: number; measureAfter?: number };
    if (m.until !== undefined) resolve({ until: m.until, measureAfter: m.measureAfter ?? spec.after });
  });
});
const deadline = Date.now() + spec.timeoutMs;
while (clients.some((c) => c.last < until && !c.closed) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
const cpu = process.cpuUsage(cpuAtReady);
const busyCores = (cpu.user + cpu.system) / 1000 / (performance.now() - readyAt);
const expected = until - spec.after;
/** The latencies of the events in (from, to], and how many. */
function latenciesOf(from: number, to: number): [Float64Array, number] {
  const picked = new Float64Array(latencyCount);
  let n = 0;
  for (let i = 0; i < latencyCount; i++) if (latencySeqs[i]! > from && latencySeqs[i]! <= to) picked[n++] = latencies[i]!;
  return [picked, n];
}
const [measured, measuredCount] = latenciesOf(measureAfter, Infinity);
const [warmup, warmupCount] = latenciesOf(spec.after, measureAfter);
const result: EventClientsResult = {
  clients: clients.length,
  sse: spec.sse,
  ws: spec.ws,
  expected_per_client: expected,
  complete: clients.filter((c) => c.received === expected && c.last === until && c.outOfOrder === 0).length,
  min_received: Math.min(...clients.map((c) => c.received)),
  max_received: Math.max(...clients.map((c) => c.received)),
  out_of_order: clients.reduce((n, c) => n + c.outOfOrder, 0),
  closed_early: clients.filter((c) => c.closed).length,
  busy_cores: Math.round(busyCores * 100) / 100,
  latency: { ...summarize(measured, measuredCount), count: measuredCount },
  warmup_latency: warmupCount > 0 ? { ...summarize(warmup, warmupCount), count: warmupCount } : undefined,
  arrivals: spec.arrivals ? [...arrivals].map(([time, [at, events]]) => [time, at, events]) : undefined,
};
process.stdout.write(`${JSON.stringify({ result })}\n`);
process.exit(0);
