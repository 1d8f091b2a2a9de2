/**
 * The load generator, run as its own process (`node dist/bench/lib/loadgen.js SPEC.json`) so that
 * it never shares an event loop with the server it measures. Prints one LoadResult as JSON.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { summarize, type LoadResult, type LoadSpec, type RequestTemplate } from './loadSpec.js';
import { runWrk, wrkAvailable } from './wrk.js';
import { specArg } from './args.js';

const require = createRequire(import.meta.url);
const autocannon = require('autocannon') as (opts: Record<string, unknown>) => AutocannonInstance;

interface AutocannonInstance {
  on(event: 'response', fn: (client: unknown, status: number, bytes: number, ms: number) => void): void;
  on(event: 'done', fn: (result: AutocannonResult) => void): void;
  on(event: 'reqError', fn: (err: unknown) => void): void;
}
interface AutocannonResult {
  errors: number;
  timeouts: number;
  duration: number;
}

const spec = JSON.parse(fs.readFileSync(specArg(), 'utf8')) as LoadSpec;
if (spec.generator !== 'autocannon' && wrkAvailable()) {
  const result = await runWrk(spec, path.dirname(specArg()));
  process.stdout.write(`${JSON.stringify({ ...result, generator: 'wrk' })}\n`);
  process.exit(0);
}

// Random choice by weight, precomputed as a table of template indexes.
const table: number[] = [];
spec.requests.forEach((r, i) => {
  for (let k = 0; k < (r.weight ?? 1); k++) table.push(i);
});
const pick = <T>(items: T[]): T => items[(Math.random() * items.length) | 0]!;
let counter = 0;
const stamp = `${process.pid.toString(36)}${Date.now().toString(36)}`.toUpperCase();
const fill = (text: string) => (text.includes('{n}') ? text.replaceAll('{n}', `${stamp}-${++counter}`) : text);

function buildRequest(template: RequestTemplate): Record<string, unknown> {
  const headers: Record<string, string> = {};
  if (!template.anonymous) headers.authorization = `Bearer ${pick(spec.tokens)}`;
  const request: Record<string, unknown> = { method: template.method, path: fill(pick(template.paths)), headers };
  if (template.body !== undefined) {
    headers['content-type'] = template.contentType ?? 'application/json';
    request.body = fill(template.body);
  }
  return request;
}

let samples = new Float64Array(1 << 20);
let count = 0;
let ok = 0;
let notOk = 0;
const unexpected: Record<string, number> = {};

function record(status: number, ms: number): void {
  if (count === samples.length) {
    const bigger = new Float64Array(samples.length * 2);
    bigger.set(samples);
    samples = bigger;
  }
  samples[count++] = ms;
  if (status >= 200 && status < 300) ok++;
  else {
    notOk++;
    unexpected[status] = (unexpected[status] ?? 0) + 1;
  }
}

function run(durationSeconds: number, measured: boolean): Promise<AutocannonResult> {
  return new Promise((resolve) => {
    const instance = autocannon({
      url: spec.url,
      connections: spec.connections,
      duration: durationSeconds,
      timeout: 10,
      requests: [{ setupRequest: () => buildRequest(spec.requests[pick(table)]!) }],
    });
    if (measured) instance.on('response', (_client, status, _bytes, ms) => record(status, ms));
    instance.on('done', resolve);
  });
}

if (spec.warmupSeconds > 0) await run(spec.warmupSeconds, false);
const result = await run(spec.durationSeconds, true);
const seconds = result.duration || spec.durationSeconds;
const out: LoadResult = {
  requests: count,
  rate: Math.round(count / seconds),
  latency: summarize(samples, count),
  ok,
  notOk,
  unexpected,
  errors: result.errors,
  timeouts: result.timeouts,
  generator: 'autocannon',
};
process.stdout.write(`${JSON.stringify(out)}\n`);
