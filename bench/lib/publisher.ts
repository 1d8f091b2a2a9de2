/**
 * Publishes a scan workload to JetStream from its own process, with the client trackd uses
 * (@nats-io/jetstream, Nats-Msg-Id = event id). Optionally paced, optionally probing
 * publish-to-visible latency: every `probeEveryMs` it takes the message just published and polls the
 * report for its asset until asset_last_seen reaches the message's observed_at.
 * Prints {published, seconds, rate, last, probes: {p50,p99,max,count}}.
 */
import fs from 'node:fs';
import { connect, headers } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { summarize } from './loadSpec.js';
import { ScanGenerator, type ScanMessage, type ScanPlan } from './scanPlan.js';

export interface PublishSpec {
  natsUrl: string;
  plan: ScanPlan;
  /** Messages per second; 0 publishes as fast as acks allow. */
  ratePerSecond: number;
  /** Publishes in flight (awaiting the stream's ack). */
  window: number;
  probe?: { url: string; token: string; everyMs: number };
}

export interface PublishResult {
  published: number;
  seconds: number;
  rate: number;
  last: { asset: number; observedAt: number };
  probes?: { p50: number; p99: number; max: number; mean: number; count: number };
}

const spec = JSON.parse(fs.readFileSync(process.argv[2], 'utf8')) as PublishSpec;
const nc = await connect({ servers: spec.natsUrl.split(','), name: 'bench-publisher' });
const js = jetstream(nc);
const generator = new ScanGenerator(spec.plan);

const probeLatencies: number[] = [];
const probes: Promise<void>[] = [];
async function probe(message: ScanMessage, publishedAt: number): Promise<void> {
  const { url, token } = spec.probe!;
  for (;;) {
    const res = await fetch(`${url}/api/v1/reports/asset-locations?asset_id=${message.asset}`, { headers: { authorization: `Bearer ${token}` } });
    const body = (await res.json()) as { data?: { asset_last_seen: string }[] };
    const seen = body.data?.[0] ? Date.parse(body.data[0].asset_last_seen) : 0;
    if (seen >= message.observedAt) {
      probeLatencies.push(performance.now() - publishedAt);
      return;
    }
    if (performance.now() - publishedAt > 30_000) throw new Error(`scan for asset ${message.asset} not visible within 30 s`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

const started = performance.now();
let nextProbe = started;
let inFlight = 0;
let published = 0;
let last: ScanMessage | undefined;
let failure: unknown;
let wake: (() => void) | undefined;
while (!generator.done && failure === undefined) {
  if (spec.ratePerSecond > 0) {
    const due = started + (published * 1000) / spec.ratePerSecond;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
  }
  while (inFlight >= spec.window) await new Promise<void>((r) => (wake = r));
  const message = generator.next();
  last = message;
  const h = headers();
  h.set('Nats-Msg-Id', message.eventId);
  const sentAt = performance.now();
  inFlight++;
  js.publish(message.subject, message.body, { headers: h }).then(
    () => {
      inFlight--;
      published++;
      wake?.();
    },
    (err: unknown) => {
      failure = err;
      inFlight--;
      wake?.();
    },
  );
  if (spec.probe !== undefined && sentAt >= nextProbe) {
    nextProbe = sentAt + spec.probe.everyMs;
    probes.push(probe(message, sentAt));
  }
}
while (inFlight > 0) await new Promise<void>((r) => (wake = r));
const seconds = (performance.now() - started) / 1000;
if (failure !== undefined) throw failure;
await Promise.all(probes);
await nc.close();
const result: PublishResult = { published, seconds, rate: Math.round(published / seconds), last: { asset: last!.asset, observedAt: last!.observedAt } };
if (probeLatencies.length > 0) result.probes = { ...summarize(Float64Array.from(probeLatencies), probeLatencies.length), count: probeLatencies.length };
process.stdout.write(`${JSON.stringify(result)}\n`);
