/**
 * Publishes a scan workload to JetStream from its own process, with the client trackd uses
 * (@nats-io/jetstream, Nats-Msg-Id = event id). Optionally paced, optionally probing
 * publish-to-visible latency: every `probeEveryMs` it takes the message just published and watches the
 * report for its asset until asset_last_seen reaches the message's observed_at.
 * Prints {published, seconds, rate, last, probes: {p50,p99,max,count}}.
 */
import fs from 'node:fs';
import { connect, headers } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { summarize } from './loadSpec.js';
import { ScanGenerator, type ScanMessage, type ScanPlan } from './scanPlan.js';
import { specArg } from './args.js';

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
  /** Wall clock (ms since the epoch) of the first publish: after the process started and connected. */
  started_at: number;
  last: { asset: number; observedAt: number };
  /** Paced runs: the furthest a publish fell behind its due time. */
  max_behind_ms: number;
  probes?: { p50: number; p99: number; max: number; mean: number; count: number };
  /** The probes' report requests, round trip in ms: what of a probe's latency is the HTTP answer. */
  polls?: { p50: number; p99: number; max: number; mean: number; count: number };
  /** Publish to the stream's ack, ms. */
  ack: { p50: number; p99: number; max: number; mean: number };
}

const spec = JSON.parse(fs.readFileSync(specArg(), 'utf8')) as PublishSpec;
// No async traces: the client otherwise builds an Error (a stack) per publish for a timeout it may
// report. On this shared machine the publisher's CPU is taken from trackd: the large field burst's
// 10,000 messages cost it 1.12 s of CPU against 1.42, and ingest-field rose about 1.05x.
const nc = await connect({ servers: spec.natsUrl.split(','), name: 'bench-publisher', noAsyncTraces: true });
const js = jetstream(nc);
const generator = new ScanGenerator(spec.plan);

const probeLatencies: number[] = [];
/** BENCH_PROBE_LOG=FILE: every probe's publish time (epoch ms, as TRACKD_PAUSE_TRACE stamps its lines) and latency, to line up a slow probe with trackd's traces. */
const probeLog: string[] | undefined = process.env.BENCH_PROBE_LOG ? [] : undefined;
const pollLatencies: number[] = [];
/** Probes waiting to be seen: the asset of a message, its observed_at, and when it was published. */
const outstanding: { asset: number; observedAt: number; publishedAt: number }[] = [];
const POLL_MS = 5;
const PROBE_TIMEOUT_MS = 30_000;

/**
 * One poller for every outstanding probe, one request in flight, all probed assets in one report
 * query (asset_id is repeatable). A poller per probe, each polling every 2 ms, put thousands of
 * report requests per second on trackd's thread once latency grew, which slowed the ingest it was
 * measuring (latency fed on itself). The resolution is the poll interval plus one request.
 */
async function pollProbes(): Promise<void> {
  const { url, token } = spec.probe!;
  while (!publishingDone || outstanding.length > 0) {
    const pollStarted = performance.now();
    if (outstanding.length > 0) {
      const assets = [...new Set(outstanding.slice(0, 200).map((p) => p.asset))];
      const res = await fetch(`${url}/api/v1/reports/asset-locations?limit=200&${assets.map((a) => `asset_id=${a}`).join('&')}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      const body = (await res.json()) as { data?: { asset_id: number; asset_last_seen: string }[] };
      const seenAt = performance.now();
      pollLatencies.push(seenAt - pollStarted);
      const lastSeen = new Map((body.data ?? []).map((row) => [row.asset_id, Date.parse(row.asset_last_seen)]));
      for (let i = outstanding.length - 1; i >= 0; i--) {
        const p = outstanding[i]!;
        if ((lastSeen.get(p.asset) ?? 0) >= p.observedAt) {
          probeLatencies.push(seenAt - p.publishedAt);
          probeLog?.push(
            `${JSON.stringify({ published_at: Math.round(performance.timeOrigin + p.publishedAt), ms: +(seenAt - p.publishedAt).toFixed(1), asset: p.asset })}\n`,
          );
          outstanding.splice(i, 1);
        } else if (seenAt - p.publishedAt > PROBE_TIMEOUT_MS)
          throw new Error(`scan for asset ${p.asset} not visible within ${PROBE_TIMEOUT_MS / 1000} s`);
      }
    }
    const wait = pollStarted + POLL_MS - performance.now();
    await new Promise((r) => setTimeout(r, Math.max(0, wait)));
  }
}

let publishingDone = false;
const poller = spec.probe === undefined ? undefined : pollProbes();
/** How far the paced publisher fell behind its schedule (a burst follows any lag). */
let maxBehindMs = 0;
const started = performance.now();
const startedAt = Date.now();
let nextProbe = started;
let inFlight = 0;
let sent = 0;
let published = 0;
const ackLatencies: number[] = [];
let last: ScanMessage | undefined;
let failure: unknown;
let wake: (() => void) | undefined;
while (!generator.done && failure === undefined) {
  if (spec.ratePerSecond > 0) {
    // Paced by messages sent, not acked: counting acks let the loop send a whole window (2,000
    // messages) at once at the start and run ahead by whatever was in flight.
    const due = started + (sent * 1000) / spec.ratePerSecond;
    const wait = due - performance.now();
    maxBehindMs = Math.max(maxBehindMs, -wait);
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
  }
  while (inFlight >= spec.window) await new Promise<void>((r) => (wake = r));
  const message = generator.next();
  last = message;
  const h = headers();
  h.set('Nats-Msg-Id', message.eventId);
  const sentAt = performance.now();
  sent++;
  inFlight++;
  js.publish(message.subject, message.body, { headers: h, timeout: 30_000 }).then(
    () => {
      ackLatencies.push(performance.now() - sentAt);
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
    outstanding.push({ asset: message.asset, observedAt: message.observedAt, publishedAt: sentAt });
  }
}
while (inFlight > 0) await new Promise<void>((r) => (wake = r));
const seconds = (performance.now() - started) / 1000;
if (failure !== undefined) {
  // The runner reports the last lines of stderr, which a stack trace fills: the cause goes last, on one line.
  const e = failure as { name?: unknown; message?: unknown; code?: unknown; stack?: unknown };
  process.stderr.write(`${String(e.stack ?? e.message)}\n`);
  process.stderr.write(
    `publish failed (${published} of ${sent} sent were acked): ${String(e.name)}: ${String(e.message)}${e.code === undefined ? '' : ` (code ${String(e.code)})`}\n`,
  );
  process.exit(1);
}
generator.savePositions();
publishingDone = true;
await poller;
if (probeLog !== undefined && probeLog.length > 0) fs.appendFileSync(process.env.BENCH_PROBE_LOG!, probeLog.join(''));
await nc.close();
const result: PublishResult = {
  published,
  seconds,
  rate: Math.round(published / seconds),
  started_at: startedAt,
  last: { asset: last!.asset, observedAt: last!.observedAt },
  max_behind_ms: Number(maxBehindMs.toFixed(1)),
  ack: summarize(Float64Array.from(ackLatencies), ackLatencies.length),
};
if (probeLatencies.length > 0)
  result.probes = { ...summarize(Float64Array.from(probeLatencies), probeLatencies.length), count: probeLatencies.length };
if (pollLatencies.length > 0)
  result.polls = { ...summarize(Float64Array.from(pollLatencies), pollLatencies.length), count: pollLatencies.length };
process.stdout.write(`${JSON.stringify(result)}\n`);
