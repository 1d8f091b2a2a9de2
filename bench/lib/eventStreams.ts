import { spawn } from 'node:child_process';
import path from 'node:path';
import type { EventClientsResult, EventClientsSpec } from './eventClients.js';
import { BENCH_DIST, stopChild, writeSpec } from './processes.js';
import type { BenchContext } from './scenario.js';

export const EVENT_OPERATIONS = ['GET /api/v1/events', 'GET /api/v1/events/stream'];

/** The organization's last event sequence now. */
export async function eventHead(ctx: BenchContext): Promise<number> {
  const page = await ctx.request('GET', '/api/v1/events?limit=1');
  if (page.status !== 200) throw new Error(`GET /api/v1/events answered ${page.status}`);
  return page.json.last_seq as number;
}

/** Stream clients opened (in their own process, `eventClients.js`); `finish` hands them the last seq to wait for. */
export interface OpenClients {
  /** Latency figures over the events after `measureAfter` (default: all of them). */
  finish(until: number, measureAfter?: number): Promise<EventClientsResult>;
  stop(): Promise<void>;
}

export async function openEventClients(
  ctx: BenchContext,
  clients: Pick<EventClientsSpec, 'sse' | 'ws' | 'latencyClients' | 'after' | 'arrivals'>,
): Promise<OpenClients> {
  const spec: EventClientsSpec = { url: ctx.trackd.url, token: ctx.tokens[0]!, timeoutMs: 30_000, ...clients };
  const child = spawn(process.execPath, [path.join(BENCH_DIST, 'lib/eventClients.js'), writeSpec(ctx.workDir, 'event-clients', spec)], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const line = (key: string) =>
    new Promise<any>((resolve, reject) => {
      const look = () => {
        const found = stdout.split('\n').find((l) => l.includes(`"${key}"`));
        if (found !== undefined) resolve(JSON.parse(found));
      };
      child.stdout!.on('data', (d: Buffer) => {
        stdout += d.toString();
        look();
      });
      look();
      void exited.then((code) => reject(new Error(`eventClients exited with ${code}: ${stderr.slice(-1000)}`)));
    });
  await line('ready');
  return {
    async finish(until, measureAfter) {
      const done = line('result');
      child.stdin!.write(`${JSON.stringify({ until, measureAfter })}\n`);
      return (await done).result as EventClientsResult;
    },
    stop: () => stopChild(child),
  };
}

/** Throws unless every client got every event once, in order. */
export function checkComplete(name: string, r: EventClientsResult): void {
  if (r.complete !== r.clients)
    throw new Error(
      `${name}: ${r.complete} of ${r.clients} clients got all ${r.expected_per_client} events (received ${r.min_received} to ${r.max_received}, ${r.out_of_order} out of order, ${r.closed_early} closed)`,
    );
}
