/**
 * An open-loop load generator, its own process (`node dist/bench/lib/openLoop.js SPEC.json`): the
 * requests are offered at a fixed rate whatever the server does (request i is due at
 * start + i / rate), over keep-alive connections (at most `connections`; a request due while all
 * are busy waits for one), and each latency runs from the request's due time, so a server that
 * falls behind shows it in the tail instead of slowing the generator down (a closed loop's p99 is
 * about connections / rate once the machine is saturated, whatever the server adds). Prints one
 * LoadResult as JSON, `rate` being what completed over the window.
 */
import fs from 'node:fs';
import http from 'node:http';
import { specArg } from './args.js';
import { summarize, type LatencySummary, type LoadResult, type LoadSpec } from './loadSpec.js';

export interface OpenLoopSpec extends Omit<LoadSpec, 'generator'> {
  /** Requests offered per second. */
  ratePerSecond: number;
}

/** What the open loop reports beyond a LoadResult: latency from the actual send, and how far the generator fell behind its schedule. */
export interface OpenLoopResult extends LoadResult {
  sent_latency: LatencySummary;
  max_behind_ms: number;
}

const spec = JSON.parse(fs.readFileSync(specArg(), 'utf8')) as OpenLoopSpec;
const url = new URL(spec.url);
const agent = new http.Agent({ keepAlive: true, maxSockets: spec.connections });
const table: number[] = [];
spec.requests.forEach((r, i) => {
  for (let k = 0; k < (r.weight ?? 1); k++) table.push(i);
});
const pick = <T>(items: T[]): T => items[(Math.random() * items.length) | 0]!;

let samples = new Float64Array(1 << 16);
let sentSamples = new Float64Array(1 << 16);
let count = 0;
let maxBehindMs = 0;
let ok = 0;
let notOk = 0;
let errors = 0;
const unexpected: Record<string, number> = {};

function record(status: number, ms: number, sentMs: number): void {
  if (count === samples.length) {
    const bigger = new Float64Array(samples.length * 2);
    bigger.set(samples);
    samples = bigger;
    const biggerSent = new Float64Array(sentSamples.length * 2);
    biggerSent.set(sentSamples);
    sentSamples = biggerSent;
  }
  sentSamples[count] = sentMs;
  samples[count++] = ms;
  if (status >= 200 && status < 300) ok++;
  else {
    notOk++;
    unexpected[status] = (unexpected[status] ?? 0) + 1;
  }
}

/** Sends one request due at `due` (performance.now()); records its latency from then when `measured`. */
function send(due: number, measured: boolean): Promise<void> {
  const template = spec.requests[pick(table)]!;
  const sent = performance.now();
  if (measured) maxBehindMs = Math.max(maxBehindMs, sent - due);
  const headers: Record<string, string> = template.anonymous ? {} : { authorization: `Bearer ${pick(spec.tokens)}` };
  return new Promise((resolve) => {
    const req = http.request(
      { host: url.hostname, port: url.port, path: pick(template.paths), method: template.method, headers, agent, timeout: 10_000 },
      (res) => {
        res.resume();
        res.on('end', () => {
          const end = performance.now();
          if (measured) record(res.statusCode ?? 0, end - due, end - sent);
          resolve();
        });
      },
    );
    req.on('error', () => {
      if (measured) errors++;
      resolve();
    });
    req.end(template.body);
  });
}

/** Offers `rate` requests a second for `seconds`; resolves when every answer is in. */
async function offer(seconds: number, measured: boolean): Promise<number> {
  const start = performance.now();
  const total = Math.round(seconds * spec.ratePerSecond);
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / spec.ratePerSecond;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    inFlight.push(send(due, measured));
  }
  await Promise.all(inFlight);
  return (performance.now() - start) / 1000;
}

if (spec.warmupSeconds > 0) await offer(spec.warmupSeconds, false);
const seconds = await offer(spec.durationSeconds, true);
const out: OpenLoopResult = {
  requests: count,
  rate: Math.round(count / seconds),
  latency: summarize(samples, count),
  sent_latency: summarize(sentSamples, count),
  max_behind_ms: Math.round(maxBehindMs * 10) / 10,
  ok,
  notOk,
  unexpected,
  errors,
  timeouts: 0,
};
agent.destroy();
process.stdout.write(`${JSON.stringify(out)}\n`);
